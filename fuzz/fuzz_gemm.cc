// libFuzzer entry points of fuzz_gemm, the differential target (fuzz/gemm_differential.h).
// Initialization loads the modules: the builtin ordinary and folded kernels where a GPU is
// usable (after the calibration guard passes), a folded module on a runner with half the folded
// kernels missing (it must fall back), and the external kernel library named by
// MXDIFF_EXTERNAL_KERNEL. Without a GPU the CPU side of every case still runs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "fmt/core.h"
#include "fuzz/calibration_guard.h"
#include "fuzz/gemm_differential.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/modules/kernel_modules.h"
#include "fuzz/target_driver.h"

namespace {

std::unique_ptr<mxdiff::fuzz::GemmDifferential> differential;

std::vector<std::unique_ptr<mxdiff::fuzz::GemmModule>> LoadModules() {
  std::vector<std::unique_ptr<mxdiff::fuzz::GemmModule>> modules;
  absl::StatusOr<std::unique_ptr<mxdiff::GemmRunner>> runner = mxdiff::GemmRunner::Create();
  if (runner.ok()) {
    std::shared_ptr<mxdiff::GemmRunner> shared(std::move(*runner));
    absl::StatusOr<mxdiff::fuzz::Calibration> calibration = mxdiff::fuzz::CalibrateDevice(*shared);
    if (!calibration.ok()) {
      fmt::print(stderr, "fuzz_gemm: calibration guard failed, not fuzzing: {}\n", calibration.status().ToString());
      std::exit(2);
    }
    fmt::print(stderr, "fuzz_gemm: {} calibrated as {}\n{}", shared->DeviceName(),
               mxdiff::StepModelName(calibration->model), calibration->report);
    absl::StatusOr<std::vector<std::unique_ptr<mxdiff::fuzz::GemmModule>>> builtin =
        mxdiff::fuzz::MakeBuiltinModules(shared, calibration->model);
    if (!builtin.ok()) {
      fmt::print(stderr, "fuzz_gemm: {}\n", builtin.status().ToString());
      std::exit(2);
    }
    modules = *std::move(builtin);
  } else {
    fmt::print(stderr, "fuzz_gemm: no CUDA device ({}): checking the CPU side only\n", runner.status().ToString());
  }
  if (const char* library = std::getenv("MXDIFF_EXTERNAL_KERNEL"); library != nullptr && *library != '\0') {
    absl::StatusOr<std::unique_ptr<mxdiff::fuzz::GemmModule>> external = mxdiff::fuzz::LoadExternalModule(library);
    if (!external.ok()) {
      fmt::print(stderr, "fuzz_gemm: {}\n", external.status().ToString());
      std::exit(2);
    }
    fmt::print(stderr, "fuzz_gemm: loaded external module {}\n", (*external)->name());
    modules.push_back(*std::move(external));
  }
  return modules;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  differential = std::make_unique<mxdiff::fuzz::GemmDifferential>(LoadModules());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mxdiff::fuzz::RunFuzzInput("fuzz_gemm", data, size, [](const mxdiff::fuzz::FuzzCase& c) {
    return differential->CheckCase(c);
  });
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return mxdiff::fuzz::MutateFuzzInput(data, size, max_size, seed, mxdiff::fuzz::kGemmProfile);
}
