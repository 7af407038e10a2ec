#include "fuzz/driver/fuzz_target.h"

#include "fmt/format.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/mutators/mutation_sequence.h"
#include "fuzz/driver/target_driver.h"

// libFuzzer's byte mutator; absent (null) in the plain replay builds.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) __attribute__((weak));

namespace mxdiff::fuzz {

CheckResult FirstFindingOf(std::span<const Finding> findings) {
  if (findings.empty()) return std::nullopt;
  Finding first = findings.front();
  for (size_t i = 1; i < findings.size(); ++i) {
    first.description += fmt::format("\n  also: {}", findings[i].signature);
  }
  return first;
}

absl::Status CaseDecodes(std::span<const uint8_t> input) {
  const absl::StatusOr<FuzzCase> c = DecodeCase(input);
  return c.ok() ? absl::OkStatus() : absl::InvalidArgumentError("not a valid case: " + c.status().ToString());
}

std::string DescribeCaseInput(std::span<const uint8_t> input) {
  const absl::StatusOr<FuzzCase> c = DecodeCase(input);
  return c.ok() ? DescribeCase(*c) : std::string();
}

InputFindings CheckCaseInput(std::span<const uint8_t> input, bool fresh,
                             const std::function<std::vector<Finding>(const FuzzCase&)>& run) {
  static thread_local FuzzCase fuzz_case;        // buffers reused across inputs
  static thread_local MaterializationMemo memo;  // and their generated contents
  if (fresh) {
    FuzzCase decoded;
    if (!DecodeCaseInto(input, decoded, Materialize::kYes, nullptr).ok()) return std::nullopt;
    return run(decoded);
  }
  if (!DecodeCaseInto(input, fuzz_case, Materialize::kYes, &memo).ok()) return std::nullopt;
  return run(fuzz_case);
}

InputFindings CheckCaseInput(std::span<const uint8_t> input, bool fresh, std::span<const NamedCheck<FuzzCase>> checks) {
  return CheckCaseInput(input, fresh, [checks](const FuzzCase& c) { return RunNamedChecks(checks, c); });
}

int RunTargetInput(const FuzzTarget& target, const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  return CheckFuzzInput(target.name, input, [&](bool fresh) -> std::optional<CheckResult> {
    const InputFindings findings = target.check(input, fresh);
    if (!findings) return std::nullopt;
    return FirstFindingOf(*findings);
  });
}

size_t MutateTargetInput(const FuzzTarget& target, uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  if (target.mutate != nullptr) return target.mutate(data, size, max_size, seed);
  // libFuzzer's own byte mutators (its MS: line names them), recorded as one step.
  StartMutationSequence(std::span<const uint8_t>(data, size));
  RecordMutation("libfuzzer-bytes");
  const size_t mutated = &LLVMFuzzerMutate != nullptr ? LLVMFuzzerMutate(data, size, max_size) : size;
  FinishMutationSequence(std::span<const uint8_t>(data, mutated));
  return mutated;
}

void InitializeTarget(const FuzzTarget& target, int* argc, char*** argv) {
  if (target.initialize == nullptr) return;
  const std::vector<std::string_view> args(*argv, *argv + *argc);
  target.initialize(args);
}

}  // namespace mxdiff::fuzz
