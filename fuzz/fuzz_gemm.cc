// libFuzzer entry points of fuzz_gemm, the differential target (fuzz/gemm_differential.h).
// Initialization loads the modules (fuzz/modules/module_loader.h: `--modules=`,
// `--disable-modules=`, `--external=LIB`, or the MXDIFF_* environment) and runs the known
// cases (fuzz/known_cases.h) through them: a disagreement there is a finding, written and
// reported like any other. A module that cannot load stops the target with exit status 2.
// Without a GPU and without an external module the CPU side of every case still runs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "fmt/core.h"
#include "fuzz/gemm_differential.h"
#include "fuzz/known_cases.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/target_driver.h"

namespace {

std::unique_ptr<mxdiff::fuzz::GemmDifferential> differential;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const std::vector<std::string_view> args(*argv, *argv + *argc);
  absl::StatusOr<mxdiff::fuzz::LoadedModules> loaded =
      mxdiff::fuzz::LoadModules(mxdiff::fuzz::ModuleSelectionFromArgs(args));
  if (!loaded.ok()) {
    fmt::print(stderr, "fuzz_gemm: not fuzzing: {}\n", loaded.status().ToString());
    std::exit(2);
  }
  fmt::print(stderr, "fuzz_gemm: {}", loaded->report);
  differential = std::make_unique<mxdiff::fuzz::GemmDifferential>(std::move(loaded->modules));
  for (const mxdiff::fuzz::FuzzCase& known : mxdiff::fuzz::KnownCases()) {
    if (mxdiff::fuzz::CheckResult finding = differential->CheckCase(known)) {
      const mxdiff::fuzz::Finding confirmed = mxdiff::fuzz::ConfirmInFreshState(*finding, [&] {
        differential->ForgetState();
        return differential->CheckCase(known);
      });
      absl::StatusOr<std::vector<uint8_t>> bytes = mxdiff::fuzz::EncodeCase(known);
      mxdiff::fuzz::ReportFindingAndAbort("fuzz_gemm", bytes.ok() ? *bytes : std::vector<uint8_t>{}, confirmed);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mxdiff::fuzz::RunFuzzInput(
      "fuzz_gemm", data, size, [](const mxdiff::fuzz::FuzzCase& c) { return differential->CheckCase(c); },
      [] { differential->ForgetState(); });
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return mxdiff::fuzz::MutateFuzzInput(data, size, max_size, seed, mxdiff::fuzz::kGemmProfile);
}
