// fuzz_gemm, the differential target (fuzz/checks/gemm_differential.h): the case format, the checks of
// kCheckNames, and its initialization, which loads the modules (fuzz/modules/module_loader.h:
// `--modules=`, `--disable-modules=`, `--external=LIB`, or the MXDIFF_* environment) and runs the
// known cases (fuzz/checks/known_cases.h) through them: a disagreement there is a finding, written and
// reported like any other. A module that cannot load stops the target with exit status 2.
// Without a GPU and without an external module the CPU side of every case still runs.
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "fmt/core.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/checks/known_cases.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/driver/target_driver.h"

namespace {

using namespace mxdiff::fuzz;

std::unique_ptr<GemmDifferential> differential;

void RunKnownCases() {
  for (const FuzzCase& known : KnownCases()) {
    if (CheckResult finding = differential->CheckCase(known)) {
      const Finding confirmed = ConfirmInFreshState(*finding, [&] {
        differential->ForgetState();
        return differential->CheckCase(known);
      });
      absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(known);
      ReportFindingAndAbort("fuzz_gemm", bytes.ok() ? *bytes : std::vector<uint8_t>{}, confirmed);
    }
  }
}

void Initialize(std::span<const std::string_view> args) {
  const ModuleSelection selection = ModuleSelectionFromArgs(args);
  // A finding of an external kernel replays only with it (the .txt's repro commands).
  if (!selection.external_library.empty()) SetReproFlags(" --external=" + selection.external_library);
  absl::StatusOr<LoadedModules> loaded = LoadModules(selection);
  if (!loaded.ok()) {
    fmt::print(stderr, "fuzz_gemm: not fuzzing: {}\n", loaded.status().ToString());
    std::exit(2);
  }
  fmt::print(stderr, "fuzz_gemm: {}", loaded->report);
  differential = std::make_unique<GemmDifferential>(std::move(loaded->modules));
  RunKnownCases();
}

// The findings of the differential's named checks (kCheckNames; its evaluation stops at the first).
std::vector<Finding> Evaluate(const FuzzCase& c) {
  std::vector<Finding> findings;
  for (const CheckVerdict& verdict : differential->Evaluate(c).verdicts) {
    if (verdict.finding) findings.push_back(*verdict.finding);
  }
  return findings;
}

InputFindings Check(std::span<const uint8_t> input, bool fresh) {
  if (differential == nullptr) Initialize({});
  if (fresh) differential->ForgetState();
  return CheckCaseInput(input, fresh, Evaluate);
}

}  // namespace

MXDIFF_FUZZ_TARGET(fuzz_gemm) {
  FuzzTarget target = CaseFormatTarget<kGemmProfile>("fuzz_gemm", "gpu", 40960);
  target.check_names.assign(std::begin(kCheckNames), std::end(kCheckNames));
  target.check = Check;
  target.initialize = Initialize;
  return target;
}
