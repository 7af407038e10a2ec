// LoadBuiltinModules where the build has CUDA: the calibration guard, then the kernel modules; and
// the device reference (reference/device/) as fuzz_gemm's second oracle.
#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/driver/calibration_guard.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "fuzz/modules/kernel_modules.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "reference/device/device_reference.h"

namespace mxdiff::fuzz {
namespace {

class DeviceReferenceOracle final : public ReferenceOracle {
 public:
  explicit DeviceReferenceOracle(std::shared_ptr<DeviceRecipeWeights> weights) : weights_(std::move(weights)) {}
  std::string name() const override { return "device-reference"; }
  absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                    std::vector<uint16_t>& output) override {
    return DeviceReferenceGemm(problem, options, output);
  }

  // The device way (GoesDeviceWay): the case's codes and scales materialized on the device from
  // their recipes (the target's DeviceRecipeWeights: the same buffers the kernel modules prepare from)
  // and handed to the device reference where they are.
  bool MaterializesRecipes() const override { return true; }
  absl::Status GemmCase(const FuzzCase& c, const ReferenceOptions& options, std::vector<uint16_t>& output) override {
    absl::StatusOr<const DeviceWeights*> weights = weights_->Of(c);
    if (!weights.ok()) return weights.status();
    return DeviceReferenceGemmOnDeviceWeights(c.Problem(), **weights, options, output);
  }
  absl::StatusOr<LayerAdmission> AdmitCase(const FuzzCase& c) override {
    absl::StatusOr<const LayerAdmission*> admission = weights_->AdmissionOf(c);
    if (!admission.ok()) return admission.status();
    return **admission;
  }

 private:
  std::shared_ptr<DeviceRecipeWeights> weights_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReferenceOracle>> MakeDeviceReferenceOracle(
    std::shared_ptr<DeviceRecipeWeights> device_weights) {
  std::string why;
  if (!DeviceReferenceAvailable(&why)) return absl::UnavailableError(fmt::format("no device reference: {}", why));
  if (device_weights == nullptr) device_weights = std::make_shared<DeviceRecipeWeights>();
  return std::make_unique<DeviceReferenceOracle>(std::move(device_weights));
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
  loaded.device_weights = std::make_shared<DeviceRecipeWeights>();
  absl::StatusOr<std::vector<std::unique_ptr<GemmModule>>> modules =
      MakeBuiltinModules(shared, calibration->model, loaded.device_weights);
  if (!modules.ok()) return modules.status();
  loaded.modules = *std::move(modules);
  return loaded;
}

}  // namespace mxdiff::fuzz
