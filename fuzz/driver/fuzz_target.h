// A fuzz target as one thing (fuzz/README.md: adding a target). A target is its codec (does an
// input decode, what it says), its named checks (every one runs on a case and each finding is
// kept), its mutator, the writer of its seeds and its options. It is defined once, in its own file,
// with MXDIFF_FUZZ_TARGET, and registered once, by its line in fuzz/targets.txt (fuzz/CMakeLists.txt
// generates the registry's list from it). Everything else iterates the registry: the libFuzzer entry
// points (MXDIFF_FUZZ_ENTRY, one line generated per target by fuzz/CMakeLists.txt), the plain
// replay binaries, repro and the corpus replay tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/target_driver.h"

namespace mxdiff::fuzz {

// One named check of a case of type Case: its name and its own function.
template <typename Case>
struct NamedCheck {
  std::string_view name;
  CheckResult (*run)(const Case&);
};

// Every check run on `c`, each finding kept, in the checks' order.
template <typename Case>
std::vector<Finding> RunNamedChecks(std::span<const NamedCheck<Case>> checks, const Case& c) {
  std::vector<Finding> findings;
  for (const NamedCheck<Case>& check : checks) {
    if (CheckResult finding = check.run(c)) findings.push_back(*std::move(finding));
  }
  return findings;
}

// The names of `checks`, for FuzzTarget::check_names.
template <typename Case, size_t N>
std::vector<std::string_view> CheckNamesOf(const NamedCheck<Case> (&checks)[N]) {
  std::vector<std::string_view> names;
  for (const NamedCheck<Case>& check : checks) names.push_back(check.name);
  return names;
}

// The finding an input reports (one per input, as libFuzzer aborts on it): the first one, its
// signature unchanged, with the other checks' signatures named in its description.
CheckResult FirstFindingOf(std::span<const Finding> findings);

struct TargetOptions {
  std::string_view kind;                      // "cpu" or "gpu", as in fuzz/targets.txt
  size_t max_len = 0;                         // libFuzzer's -max_len (fuzz/options/<name>.options)
  std::string_view dictionary;                // the file in fuzz/dictionaries/, empty: none
};

// What a target's check says about one input: nullopt when it is not an input of the target.
using InputFindings = std::optional<std::vector<Finding>>;

struct FuzzTarget {
  std::string_view name;  // fuzz_<something>: the binary, corpus/<name>/, fuzz/options/<name>.options
  TargetOptions options;
  // The codec's name: "case" (fuzz/formats/case_format.h), "layer", ...; targets of one format read each
  // other's inputs (repro runs every cpu target of the case format on a GEMM case).
  std::string_view format;
  // The codec: does the input decode, and the case in words (empty when it does not decode).
  bool (*decodes)(std::span<const uint8_t> input) = nullptr;
  std::string (*describe)(std::span<const uint8_t> input) = nullptr;
  // The names of its checks, in the order they run.
  std::vector<std::string_view> check_names;
  // Runs every check. `fresh`: the target drops what it keeps across inputs first.
  InputFindings (*check)(std::span<const uint8_t> input, bool fresh) = nullptr;
  // The structured mutator (libFuzzer's custom mutator); null: libFuzzer's byte mutator.
  size_t (*mutate)(uint8_t* data, size_t size, size_t max_size, unsigned seed) = nullptr;
  // Who writes corpus/<name>/'s seeds: a program of the build, or "committed".
  std::string_view seed_writer;
  // LLVMFuzzerInitialize's work (modules, device), given the command line; null: none.
  void (*initialize)(std::span<const std::string_view> args) = nullptr;
};

// Every registered target (fuzz/targets/registry.cc), in fuzz/targets.txt's order.
std::span<const FuzzTarget* const> Registry();
const FuzzTarget* FindTarget(std::string_view name);
// The target whose name starts a file name "<target>.<...>", else null.
const FuzzTarget* TargetOfFileName(std::string_view file_name);

// The codec and check of the targets of the case format (fuzz/formats/case_format.h): decode (with the
// materialization memo across inputs unless `fresh`), then every check.
bool CaseDecodes(std::span<const uint8_t> input);
std::string DescribeCaseInput(std::span<const uint8_t> input);
InputFindings CheckCaseInput(std::span<const uint8_t> input, bool fresh, std::span<const NamedCheck<FuzzCase>> checks);
InputFindings CheckCaseInput(std::span<const uint8_t> input, bool fresh,
                             const std::function<std::vector<Finding>(const FuzzCase&)>& run);

// The parts every target of the case format shares: the codec "case", the dictionary
// mxdiff.dict, the seeds mxdiff_fuzz_seeds writes, the structured mutator under `Profile`.
template <const MutationProfile& Profile>
FuzzTarget CaseFormatTarget(std::string_view name, std::string_view kind, size_t max_len) {
  return FuzzTarget{
      .name = name,
      .options = {.kind = kind, .max_len = max_len, .dictionary = "mxdiff.dict"},
      .format = "case",
      .decodes = CaseDecodes,
      .describe = DescribeCaseInput,
      .mutate = [](uint8_t* data, size_t size, size_t max_size, unsigned seed) {
        return MutateFuzzInput(data, size, max_size, seed, Profile);
      },
      .seed_writer = "mxdiff_fuzz_seeds",
  };
}

// A CPU target of the case format whose checks are one module's (fuzz/checks/<x>_target.h):
// `Names` lists them in order and `Findings` runs every one on a case. The whole definition of
// such a target (fuzz/targets/fuzz_reference.cc):
//   MXDIFF_FUZZ_TARGET(fuzz_x) { return CaseChecksTarget<kXProfile, XCheckNames, XFindings>("fuzz_x", 2048); }
template <const MutationProfile& Profile, std::vector<std::string_view> (*Names)(),
          std::vector<Finding> (*Findings)(const FuzzCase&)>
FuzzTarget CaseChecksTarget(std::string_view name, size_t max_len) {
  FuzzTarget target = CaseFormatTarget<Profile>(name, "cpu", max_len);
  target.check_names = Names();
  target.check = [](std::span<const uint8_t> input, bool fresh) { return CheckCaseInput(input, fresh, Findings); };
  return target;
}

// What the entry points do with one input (fuzz/driver/target_driver.h: CheckFuzzInput).
int RunTargetInput(const FuzzTarget& target, const uint8_t* data, size_t size);
size_t MutateTargetInput(const FuzzTarget& target, uint8_t* data, size_t size, size_t max_size, unsigned seed);
void InitializeTarget(const FuzzTarget& target, int* argc, char*** argv);

}  // namespace mxdiff::fuzz

// Defines target `name`'s accessor: MXDIFF_FUZZ_TARGET(fuzz_x) { return FuzzTarget{...}; }
#define MXDIFF_FUZZ_TARGET(name)                                              \
  static ::mxdiff::fuzz::FuzzTarget MakeFuzzTarget_##name();                  \
  const ::mxdiff::fuzz::FuzzTarget& MxdiffFuzzTarget_##name() {               \
    static const ::mxdiff::fuzz::FuzzTarget target = MakeFuzzTarget_##name(); \
    return target;                                                            \
  }                                                                           \
  static ::mxdiff::fuzz::FuzzTarget MakeFuzzTarget_##name()

#define MXDIFF_DECLARE_FUZZ_TARGET(name) const ::mxdiff::fuzz::FuzzTarget& MxdiffFuzzTarget_##name();

// The libFuzzer entry points of target `name`: the whole of its generated fuzz binary source.
#define MXDIFF_FUZZ_ENTRY(name)                                                                           \
  MXDIFF_DECLARE_FUZZ_TARGET(name)                                                                        \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {                                          \
    ::mxdiff::fuzz::InitializeTarget(MxdiffFuzzTarget_##name(), argc, argv);                              \
    return 0;                                                                                             \
  }                                                                                                       \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                               \
    return ::mxdiff::fuzz::RunTargetInput(MxdiffFuzzTarget_##name(), data, size);                         \
  }                                                                                                       \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) { \
    return ::mxdiff::fuzz::MutateTargetInput(MxdiffFuzzTarget_##name(), data, size, max_size, seed);      \
  }
