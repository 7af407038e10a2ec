#include "fuzz/driver/target_driver.h"

#include <cstdlib>
#include <optional>
#include <span>

#include "fuzz/formats/case_format.h"

// libFuzzer's byte mutator; absent (null) in the plain replay builds.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) __attribute__((weak));

namespace mxdiff::fuzz {

int CheckFuzzInput(std::string_view target, std::span<const uint8_t> input,
                   const std::function<std::optional<CheckResult>(bool fresh)>& check) {
  static InputHistory history;  // before this input, so a finding's sequence ends with it
  const std::optional<CheckResult> result = check(/*fresh=*/false);
  if (!result) return -1;
  if (*result) {
    ReportFinding(target, input, **result, [&] { return check(/*fresh=*/true).value_or(std::nullopt); }, &history);
  }
  history.Push(input);
  return 0;
}

int RunFuzzInput(std::string_view target, const uint8_t* data, size_t size, const CaseCheck& check,
                 const std::function<void()>& forget_state) {
  return CheckFuzzInput(target, std::span<const uint8_t>(data, size), [&](bool fresh) -> std::optional<CheckResult> {
    static thread_local FuzzCase fuzz_case;        // buffers reused across inputs
    static thread_local MaterializationMemo memo;  // and their generated contents
    if (fresh) {
      if (forget_state) forget_state();
      FuzzCase decoded;
      if (!DecodeCaseInto(std::span<const uint8_t>(data, size), decoded, Materialize::kYes, nullptr).ok()) {
        return std::nullopt;
      }
      return check(decoded);
    }
    if (!DecodeCaseInto(std::span<const uint8_t>(data, size), fuzz_case, Materialize::kYes, &memo).ok()) {
      return std::nullopt;
    }
    return check(fuzz_case);
  });
}

bool GpuRequired() {
  const char* value = std::getenv("MXDIFF_REQUIRE_GPU");
  return value != nullptr && std::string_view(value) == "1";
}

size_t MutateFuzzInput(uint8_t* data, size_t size, size_t max_size, unsigned seed, const MutationProfile& profile) {
  ByteMutator byte_mutator;
  if (&LLVMFuzzerMutate != nullptr) byte_mutator = LLVMFuzzerMutate;
  return MutateEncodedCase(data, size, max_size, seed, profile, byte_mutator);
}

}  // namespace mxdiff::fuzz
