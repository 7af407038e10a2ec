// LoadBuiltinModules where the build has CUDA: the calibration guard, then the kernel modules; and
// the device reference (reference/device/) as fuzz_gemm's second oracle.
#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/driver/calibration_guard.h"
#include "fuzz/modules/kernel_modules.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "reference/device/device_reference.h"

namespace mxdiff::fuzz {
namespace {

class DeviceReferenceOracle final : public ReferenceOracle {
 public:
  std::string name() const override { return "device-reference"; }
  absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                    std::vector<uint16_t>& output) override {
    return DeviceReferenceGemm(problem, options, output);
  }

  // The device way (GoesDeviceWay): the case's codes and scales where the device materialized
  // them (the same buffers the kernel modules prepare from), handed to the device reference there.
  bool TakesDeviceWeights() const override { return true; }
  absl::Status GemmOnDeviceWeights(const GroupedProblem& rows, const DeviceCaseWeights& weights,
                                   const ReferenceOptions& options, std::vector<uint16_t>& output) override {
    if (weights.weights == nullptr) return absl::InvalidArgumentError("the case's weights are not in device memory");
    return DeviceReferenceGemmOnDeviceWeights(rows, *weights.weights, options, output);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReferenceOracle>> MakeDeviceReferenceOracle() {
  std::string why;
  if (!DeviceReferenceAvailable(&why)) return absl::UnavailableError(fmt::format("no device reference: {}", why));
  return std::make_unique<DeviceReferenceOracle>();
}

absl::StatusOr<LoadedModules> LoadBuiltinModules() {
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner = GemmRunner::Create();
  if (!runner.ok()) {
    return absl::UnavailableError(fmt::format("no usable CUDA device ({})", runner.status().ToString()));
  }
  std::shared_ptr<GemmRunner> shared(std::move(*runner));
  absl::StatusOr<Calibration> calibration = CalibrateDevice();
  if (!calibration.ok()) {
    return absl::FailedPreconditionError(fmt::format("calibration guard failed on {}, not comparing: {}",
                                                     shared->DeviceName(),
                                                     std::string(calibration.status().message())));
  }
  LoadedModules loaded;
  loaded.report = fmt::format("{} calibrated as {}\n{}", shared->DeviceName(), StepModelName(calibration->model),
                              calibration->report);
  absl::StatusOr<std::vector<std::unique_ptr<GemmModule>>> modules = MakeBuiltinModules(shared, calibration->model);
  if (!modules.ok()) return modules.status();
  loaded.modules = *std::move(modules);
  return loaded;
}

}  // namespace mxdiff::fuzz
