// fuzz_gemm, the differential target (fuzz/checks/gemm_differential.h): the case format, the checks of
// kCheckNames, and its initialization, which loads the modules (fuzz/modules/module_loader.h:
// `--modules=`, `--disable-modules=`, `--external=LIB`, or the MXDIFF_* environment) and runs the
// known cases (fuzz/checks/known_cases.h) through them: a disagreement there is a finding, written and
// reported like any other. A module that cannot load stops the target with exit status 2.
// Without a GPU and without an external module the CPU side of every case still runs.
// The reference of a large case comes from the device reference where there is one, checked on the
// CPU for 1 in `--cpu-check-every=N` of them (MXDIFF_CPU_CHECK_EVERY; default 16; 1: every one;
// 0: no device reference, every case on the CPU). MXDIFF_STATS_FILE=PATH: the counters of what was
// compared (cases per shape class, output elements, CPU- and device-judged cases, fallbacks),
// rewritten once a second, for the campaign's report.
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

void RunKnownCases() {
  for (const FuzzCase& known : KnownCases()) {
    if (CheckResult finding = differential->CheckCase(known)) {
      absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(known);
      ReportFinding("fuzz_gemm", bytes.ok() ? *bytes : std::vector<uint8_t>{}, *finding, [&] {
        differential->ForgetState();
        return differential->CheckCase(known);
      }, nullptr);
    }
  }
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
    fmt::print(file, "{}device_oracle {:d}\nseconds {:.1f}\n", CountersText(differential->counters()),
               differential->device_oracle() != nullptr,
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
std::vector<Finding> Evaluate(const FuzzCase& c) {
  std::vector<Finding> findings;
  for (const CheckVerdict& verdict : differential->Evaluate(c).verdicts) {
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
  static thread_local FuzzCase fuzz_case, description;  // buffers reused across inputs
  static thread_local MaterializationMemo memo;
  FuzzCase decoded;
  FuzzCase& c = fresh ? decoded : fuzz_case;
  const auto started = std::chrono::steady_clock::now();
  const PhaseSeconds phases_before = differential->counters().seconds;
  {
    PhaseTimer timer(differential->decode_seconds());
    if (!DecodeForDifferential(input, *differential, c, description, fresh ? nullptr : &memo).ok()) return std::nullopt;
  }
  InputFindings findings = Evaluate(c);
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
