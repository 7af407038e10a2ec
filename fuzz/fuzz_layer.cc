// libFuzzer entry points of fuzz_layer (fuzz/layer_target.h): the MoE decode layer captured into
// a CUDA graph and replayed case by case against the reference. Without a usable GPU (or in a
// build without CUDA) it checks the CPU side of every case and says so once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "fmt/core.h"
#include "fuzz/layer_mutator.h"
#include "fuzz/layer_target.h"
#include "fuzz/target_driver.h"

namespace {

std::unique_ptr<mxdiff::fuzz::LayerDifferential> differential;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  differential = std::make_unique<mxdiff::fuzz::LayerDifferential>(/*use_device=*/true);
  if (differential->device_available()) {
    fmt::print(stderr, "fuzz_layer: {} calibrated as {}\n{}", differential->device()->name,
               mxdiff::StepModelName(differential->device()->model), differential->device()->report);
  } else {
    // Only a machine without a usable CUDA device fuzzes the CPU side alone: a GPU that fails
    // the guard, or any other device error, stops the target (the campaign reports it).
    const absl::Status& why = differential->device().status();
    if (why.code() == absl::StatusCode::kFailedPrecondition) {
      fmt::print(stderr, "fuzz_layer: calibration guard failed, not fuzzing: {}\n", why.ToString());
      std::exit(2);
    }
    if (why.code() != absl::StatusCode::kUnavailable) {
      fmt::print(stderr, "fuzz_layer: the device cannot be used, not fuzzing: {}\n", why.ToString());
      std::exit(2);
    }
    if (mxdiff::fuzz::GpuRequired()) {
      fmt::print(stderr, "fuzz_layer: MXDIFF_REQUIRE_GPU=1 (a GPU is present) but no device, not fuzzing: {}\n",
                 why.ToString());
      std::exit(2);
    }
    fmt::print(stderr, "fuzz_layer: no device ({}): checking the CPU side only\n", why.ToString());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  return mxdiff::fuzz::CheckFuzzInput(
      "fuzz_layer", input, [&](bool fresh) -> std::optional<mxdiff::fuzz::CheckResult> {
        if (fresh) differential->ForgetState();
        absl::StatusOr<mxdiff::fuzz::LayerCase> c = mxdiff::fuzz::DecodeLayerCase(input);
        if (!c.ok()) return std::nullopt;
        return differential->CheckCase(*c);
      });
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return mxdiff::fuzz::MutateEncodedLayerCase(data, size, max_size, seed, mxdiff::fuzz::kLayerProfile);
}
