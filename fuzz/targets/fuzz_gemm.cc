// fuzz_gemm, the differential target (fuzz/checks/gemm_differential.h): the case format, the checks of
// kCheckNames, and its initialization, which loads the modules (fuzz/modules/module_loader.h:
// `--modules=`, `--disable-modules=`, `--external=LIB`, or the MXDIFF_* environment) and runs the
// known cases (fuzz/checks/known_cases.h) through them: a disagreement there is a finding, written and
// reported like any other. A module that cannot load stops the target with exit status 2.
// Without a GPU and without an external module the CPU side of every case still runs.
// The reference of a large case comes from the device reference where there is one, checked on the
// CPU for 1 in `--cpu-check-every=N` of them (MXDIFF_CPU_CHECK_EVERY; default 16; 1: every one;
// 0: no device reference, every case on the CPU). MXDIFF_STATS_FILE=PATH: the counters of what was
// compared (cases per shape class, output elements, CPU- and device-judged cases, fallbacks, and per
// module the cases it declined), rewritten once a second, for the campaign's report.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "fmt/core.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/checks/known_cases.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "fuzz/driver/target_driver.h"
#include "reference/exit_status.h"

namespace {

using namespace mxdiff::fuzz;

std::unique_ptr<GemmDifferential> differential;

// Each known case is marked as the running input first (MarkRunningInput): libFuzzer's crash handler
// is not installed yet, so a kernel that crashes here would otherwise leave no input behind.
void RunKnownCases() {
  const std::vector<FuzzCase> known_cases = KnownCases();
  for (size_t i = 0; i < known_cases.size(); ++i) {
    const FuzzCase& known = known_cases[i];
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(known);
    const std::vector<uint8_t> input = bytes.ok() ? *std::move(bytes) : std::vector<uint8_t>{};
    MarkRunningInput(input, fmt::format("known case {} of {} (fuzz/checks/known_cases.h), run by fuzz_gemm's "
                                        "LLVMFuzzerInitialize before fuzzing",
                                        i + 1, known_cases.size()));
    if (CheckResult finding = differential->CheckCase(known)) {
      ClearRunningInput();  // a finding, written with its input below: not a crash
      ReportFinding("fuzz_gemm", input, *finding, [&] {
        differential->ForgetState();
        return differential->CheckCase(known);
      }, nullptr);
    }
  }
  ClearRunningInput();
}

// Per module, the fuzzed cases it was given, those it declined (MXDIFF_KERNEL_UNSUPPORTED, or out of
// memory) and those whose output was compared (it ran a route: not declined, not refused by the
// dispatch rules): a module that compared nothing was not fuzzed, says the campaign. Written to the
// stats file as "module_runs_<name> N", "module_declined_<name> N" and "module_compared_<name> N".
struct ModuleTally {
  std::string name;
  size_t runs = 0, declined = 0, compared = 0;
};
std::vector<ModuleTally> module_tallies;

void TallyModules(const CaseEvaluation& evaluation) {
  for (const ModuleRun& run : evaluation.runs) {
    auto tally = std::find_if(module_tallies.begin(), module_tallies.end(),
                              [&](const ModuleTally& t) { return t.name == run.module; });
    if (tally == module_tallies.end()) tally = module_tallies.insert(module_tallies.end(), ModuleTally{run.module});
    ++tally->runs;
    tally->declined += run.unsupported;
    tally->compared += !run.unsupported && run.route.ok();
  }
}

std::string ModuleTallyText() {
  std::string text;
  for (const ModuleTally& t : module_tallies) {
    text += fmt::format("module_runs_{0} {1}\nmodule_declined_{0} {2}\nmodule_compared_{0} {3}\n", t.name, t.runs,
                        t.declined, t.compared);
  }
  return text;
}

// MXDIFF_STATS_FILE: the differential's counters (CountersText) and the seconds since the first
// case, rewritten at most once a second and at exit (write, then rename: a reader never sees half).
void WriteStats(bool now) {
  static const char* path = std::getenv("MXDIFF_STATS_FILE");
  static const auto started = std::chrono::steady_clock::now();
  static auto last = started;
  if (path == nullptr || *path == '\0' || differential == nullptr) return;
  const auto clock = std::chrono::steady_clock::now();
  if (!now && clock - last < std::chrono::seconds(1)) return;
  last = clock;
  const std::string temporary = std::string(path) + ".tmp";
  if (std::FILE* file = std::fopen(temporary.c_str(), "w")) {
    fmt::print(file, "{}{}device_oracle {:d}\nseconds {:.1f}\n", CountersText(differential->counters()),
               ModuleTallyText(), differential->device_oracle() != nullptr,
               std::chrono::duration<double>(clock - started).count());
    std::fclose(file);
    std::rename(temporary.c_str(), path);
  }
}

// `--cpu-check-every=N`, else MXDIFF_CPU_CHECK_EVERY, else 16; a bad value stops the target (exit 2).
int CpuCheckEvery(std::span<const std::string_view> args) {
  std::string text;
  std::string_view from = "MXDIFF_CPU_CHECK_EVERY";
  if (const char* value = std::getenv("MXDIFF_CPU_CHECK_EVERY")) text = value;
  for (std::string_view arg : args) {
    constexpr std::string_view kFlag = "--cpu-check-every=";
    if (arg.substr(0, kFlag.size()) == kFlag) {
      text = std::string(arg.substr(kFlag.size()));
      from = "--cpu-check-every";
    }
  }
  if (text.empty()) return OracleSettings{}.cpu_check_every;
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > 1000000) {
    fmt::print(stderr, "fuzz_gemm: not fuzzing: {} '{}' is not a whole number in 0..1000000\n", from, text);
    std::exit(mxdiff::kExitBadInput);
  }
  return value;
}

void Initialize(std::span<const std::string_view> args) {
  const ModuleSelection selection = ModuleSelectionFromArgs(args);
  // A finding of an external kernel replays only with it (the .txt's repro commands).
  if (!selection.external_library.empty()) SetReproFlags(" --external=" + selection.external_library);
  absl::StatusOr<LoadedModules> loaded = LoadModules(selection);
  if (!loaded.ok()) {
    fmt::print(stderr, "fuzz_gemm: not fuzzing: {}\n", loaded.status().ToString());
    std::exit(mxdiff::kExitBadInput);
  }
  fmt::print(stderr, "fuzz_gemm: {}", loaded->report);
  OracleSettings settings;
  settings.cpu_check_every = CpuCheckEvery(args);
  std::unique_ptr<ReferenceOracle> device_oracle;
  if (settings.cpu_check_every > 0) {
    absl::StatusOr<std::unique_ptr<ReferenceOracle>> made = MakeDeviceReferenceOracle();
    if (made.ok()) device_oracle = *std::move(made);
    fmt::print(stderr, "fuzz_gemm: oracle: {}\n",
               made.ok() ? fmt::format("the device reference above {:.0f} multiply-adds, checked on the CPU for 1 "
                                       "in {} of those cases; the CPU reference below",
                                       settings.device_above_work, settings.cpu_check_every)
                         : fmt::format("the CPU reference for every case ({})", std::string(made.status().message())));
  } else {
    fmt::print(stderr, "fuzz_gemm: oracle: the CPU reference for every case (--cpu-check-every=0)\n");
  }
  differential = std::make_unique<GemmDifferential>(std::move(loaded->modules), std::move(device_oracle), settings);
  std::atexit([] { WriteStats(true); });
  RunKnownCases();
}

// The findings of the differential's named checks (kCheckNames): every check runs, every finding is kept.
std::vector<Finding> Evaluate(const FuzzCase& c, std::span<const uint8_t> input) {
  std::vector<Finding> findings;
  const CaseEvaluation evaluation = differential->Evaluate(c, input);
  TallyModules(evaluation);
  for (const CheckVerdict& verdict : evaluation.verdicts) {
    if (verdict.finding) findings.push_back(*verdict.finding);
  }
  WriteStats(false);
  return findings;
}

InputFindings Check(std::span<const uint8_t> input, bool fresh) {
  if (differential == nullptr) Initialize({});
  if (fresh) differential->ForgetState();
  // As CheckCaseInput, but a case the device way judges without a CPU check keeps its codes off the
  // host (DecodeForDifferential): only the device materializes them.
  static thread_local FuzzCase fuzz_case;  // buffers reused across inputs
  static thread_local MaterializationMemo memo;
  FuzzCase decoded;
  FuzzCase& c = fresh ? decoded : fuzz_case;
  const auto started = std::chrono::steady_clock::now();
  const PhaseSeconds phases_before = differential->counters().seconds;
  {
    PhaseTimer timer(differential->decode_seconds());
    if (!DecodeForDifferential(input, *differential, c, fresh ? nullptr : &memo).ok()) return std::nullopt;
  }
  InputFindings findings = Evaluate(c, input);
  differential->AddCaseSeconds(c, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                               phases_before);
  return findings;
}

}  // namespace

MXDIFF_FUZZ_TARGET(fuzz_gemm) {
  FuzzTarget target = CaseFormatTarget<kGemmProfile>("fuzz_gemm", "gpu", 40960);
  target.check_names.assign(std::begin(kCheckNames), std::end(kCheckNames));
  target.check = Check;
  target.initialize = Initialize;
  return target;
}
