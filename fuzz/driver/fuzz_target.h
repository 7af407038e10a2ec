// A fuzz target as one thing (fuzz/README.md: adding a target). A target is its codec (does an
// input decode, what it says), its named checks (every one runs on a case and each finding is
// kept), its mutator, the writer of its seeds and its options. It is defined once, in its own file,
// with MXDIFF_FUZZ_TARGET, and registered once, by its line in fuzz/targets.txt (fuzz/CMakeLists.txt
// generates the registry's list from it). Everything else iterates the registry: the libFuzzer entry
// points (MXDIFF_FUZZ_ENTRY, one line generated per target by fuzz/CMakeLists.txt), the plain
// replay binaries, repro (its ReproParts: tools/repro reaches every target through them alone) and
// the corpus replay tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

struct FuzzTarget;

// --- What repro (tools/repro) asks of a target. It picks the target of a file by its codec's magic
// (else the file name <target>.<...>, else the first registered target), refuses a flag the target
// does not support, decodes the file with the target's codec, then hands it to the target's
// ReproSession: repro knows no target by name.

// A finding as repro reports it: the target whose check found it, and where known the check and module.
struct TargetFinding {
  std::string target;
  Finding finding;
  std::string check;
  std::string module;
};

// One check's verdict on one input, for repro --json's "checks".
struct ReproCheckVerdict {
  std::string check;
  std::string module;
  bool passed = true;
  std::string signature;
};

// The plan a module reported it ran (kernel C ABI version 2), for repro --json's "plans": the
// cta_k and split count that ran, its kernel label, and the case's (split count effective).
struct ReproRanPlan {
  std::string module;
  int cta_k = 0, splits = 0;
  std::string kernel;
  int requested_cta_k = 0, requested_splits = 0;
};

// The flags of repro a target reads (tools/repro/README.md; their defaults are its flags').
struct ReproOptions {
  std::FILE* text = stdout;  // where the readable text goes (stderr with --json)
  int show = 0;              // --show: mismatching elements printed per module
  std::vector<std::string> modules, disable_modules;  // --modules, --disable-modules
  std::string external;                               // --external
  int minimize_evaluations = 0;                       // --minimize-evaluations
};

// What repro keeps across the inputs of one run, for the inputs of one format: repro FILE opens one
// and explains the file; repro --sequence DIR opens one per format and replays every input of that
// format on it (modules loaded once, device state kept from input to input, as the worker ran them).
class ReproSession {
 public:
  virtual ~ReproSession() = default;
  // repro FILE, on an input the target's codec decodes: prints the case, every check's verdict and
  // what explains it to ReproOptions::text; returns the findings. An error is bad input (exit 2;
  // its message is repro's one line).
  virtual absl::StatusOr<std::vector<TargetFinding>> Explain(const std::string& path,
                                                             std::span<const uint8_t> input) = 0;
  // repro --sequence: readies what the inputs share; the text that heads the replay. An error: exit 2.
  virtual absl::StatusOr<std::string> StartSequence() { return std::string(); }
  // One input of a sequence (its codec decodes it), in silence: its findings.
  virtual std::vector<TargetFinding> Replay(std::span<const uint8_t> input) = 0;
  // Findings of the session itself (not of one input) at the end of a sequence, and what the
  // sequence's closing line adds for them.
  virtual std::vector<TargetFinding> SessionFindings() const { return {}; }
  virtual std::string SessionNote() const { return std::string(); }
  // --minimize (ReproParts::minimize): shrinks the input Explain saw while `finding` keeps its
  // signature and writes it to path + ".min"; an error: exit 2.
  virtual absl::Status Minimize(const std::string& path, const TargetFinding& finding);
  // --json (ReproParts::json): every check's verdict on the input Explain saw.
  virtual std::vector<ReproCheckVerdict> CheckVerdicts() const { return {}; }
  // --json: the plans the modules reported they ran on that input (none: every module ran its tactic's).
  virtual std::vector<ReproRanPlan> RanPlans() const { return {}; }
  // The modules that declined the input Explain saw (MXDIFF_KERNEL_UNSUPPORTED, or out of memory):
  // nothing of theirs was compared, so a case without findings is not clean but not checked (exit 3).
  virtual std::vector<std::string> Declined() const { return {}; }
  // The closing line of repro FILE, after --minimize and --emit: "reproduced clean", "not checked:
  // the module ... declined this case", or the count of findings.
  virtual void Conclude(const std::vector<TargetFinding>& findings);

 protected:
  explicit ReproSession(const ReproOptions& options) : options_(options) {}
  ReproOptions options_;
};

// The session of a target without one of its own: the case described (FuzzTarget::describe), every
// check run (FuzzTarget::check), every finding printed.
std::unique_ptr<ReproSession> OpenChecksRepro(const FuzzTarget& target, const ReproOptions& options);
// --emit's default: the case into the regressions folder as <target>.<signature>.<hash>.case
// (fuzz/driver/findings.h), under its first finding's target (else the file name's, else this target).
absl::StatusOr<std::string> EmitAsFinding(const FuzzTarget& target, std::span<const uint8_t> input,
                                          const std::string& path, const TargetFinding* first,
                                          const std::string& regressions_dir);

struct ReproParts {
  // What repro's messages call the format's cases ("GEMM", "layer"); empty: the format's name.
  std::string_view cases;
  // Its session (null: a target repro cannot reach, which the registry test refuses).
  std::unique_ptr<ReproSession> (*open)(const FuzzTarget& target, const ReproOptions& options) = OpenChecksRepro;
  // --emit: writes the case where its regressions go; the file written. An error's message is repro's line.
  absl::StatusOr<std::string> (*emit)(const FuzzTarget& target, std::span<const uint8_t> input, const std::string& path,
                                      const TargetFinding* first, const std::string& regressions_dir) = EmitAsFinding;
  bool minimize = false;  // its session's Minimize works; else repro refuses --minimize on its cases
  bool json = false;      // its session's CheckVerdicts works; else repro refuses --json on its cases
};

struct FuzzTarget {
  std::string_view name;  // fuzz_<something>: the binary, corpus/<name>/, fuzz/options/<name>.options
  TargetOptions options;
  // The codec's name: "case" (fuzz/formats/case_format.h), "layer", ...; targets of one format read each
  // other's inputs (repro runs every cpu target of the case format on a GEMM case). The first
  // registered target of a format speaks for it in repro.
  std::string_view format;
  // The codec: OK when the input decodes, else why not, in one line that follows "FILE is "
  // ("not a valid layer case: ...").
  absl::Status (*decode)(std::span<const uint8_t> input) = nullptr;
  // The case in words (empty when it does not decode).
  std::string (*describe)(std::span<const uint8_t> input) = nullptr;
  // The bytes every input of the format starts with (repro picks a file's target by them); empty:
  // none (repro reaches the target by a file named <target>.<...>).
  std::string_view magic;
  // The largest input the codec decodes (repro reads no more of a file); 0: options.max_len.
  size_t max_size = 0;
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
  // What repro does with its cases.
  ReproParts repro;
};

// Every registered target (fuzz/targets/registry.cc), in fuzz/targets.txt's order.
std::span<const FuzzTarget* const> Registry();
const FuzzTarget* FindTarget(std::string_view name);
// The target whose name starts a file name "<target>.<...>", else null.
const FuzzTarget* TargetOfFileName(std::string_view file_name);
// The target repro gives a file named `file_name` holding `input`: the first target of the format
// whose codec's magic starts it, else of the target the name starts with (<target>.<...>), else of
// the first registered target.
const FuzzTarget& TargetOfInput(std::string_view file_name, std::span<const uint8_t> input);
// The first registered target of `target`'s format: the one that speaks for the format in repro.
const FuzzTarget& FormatHead(const FuzzTarget& target);
// What repro's messages call `target`'s cases (ReproParts::cases, else the format's name).
std::string_view CasesName(const FuzzTarget& target);

// The codec and check of the targets of the case format (fuzz/formats/case_format.h): decode (with the
// materialization memo across inputs unless `fresh`), then every check.
absl::Status CaseDecodes(std::span<const uint8_t> input);
std::string DescribeCaseInput(std::span<const uint8_t> input);
InputFindings CheckCaseInput(std::span<const uint8_t> input, bool fresh, std::span<const NamedCheck<FuzzCase>> checks);
InputFindings CheckCaseInput(std::span<const uint8_t> input, bool fresh,
                             const std::function<std::vector<Finding>(const FuzzCase&)>& run);

// repro's parts of the case format (fuzz/targets/case_repro.cc): the CPU targets of the format and
// fuzz_gemm's checks on the modules the flags select, the mismatches explained; --minimize, --json.
ReproParts CaseFormatRepro();

// The parts every target of the case format shares: the codec "case", the dictionary
// mxdiff.dict, the seeds mxdiff_fuzz_seeds writes, the structured mutator under `Profile`, repro's parts.
template <const MutationProfile& Profile>
FuzzTarget CaseFormatTarget(std::string_view name, std::string_view kind, size_t max_len) {
  return FuzzTarget{
      .name = name,
      .options = {.kind = kind, .max_len = max_len, .dictionary = "mxdiff.dict"},
      .format = "case",
      .decode = CaseDecodes,
      .describe = DescribeCaseInput,
      .magic = std::string_view(kCaseMagic, sizeof kCaseMagic),
      .max_size = MaxEncodedSize(),
      .mutate = [](uint8_t* data, size_t size, size_t max_size, unsigned seed) {
        return MutateFuzzInput(data, size, max_size, seed, Profile);
      },
      .seed_writer = "mxdiff_fuzz_seeds",
      .repro = CaseFormatRepro(),
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
