// LoadBuiltinModules where the build has CUDA: the calibration guard, then the kernel modules; and
// the device reference (reference/device/) as fuzz_gemm's second oracle.
#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/driver/calibration_guard.h"
#include "fuzz/formats/tensor_recipe_device.h"
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

  // The device way (GoesDeviceWay): the case's codes and scales materialized on the device from
  // their recipes, kept while the next case has the same weights (the shape and both recipes),
  // and handed to the device reference where they are.
  bool MaterializesRecipes() const override { return true; }
  absl::Status GemmCase(const FuzzCase& c, const ReferenceOptions& options, std::vector<uint16_t>& output) override {
    if (!WeightsFromRecipes(c)) return absl::InvalidArgumentError("the case's weights are not recipes");
    if (!(materialized_ && groups_ == c.groups && n_ == c.n && k_ == c.k &&
          codes_recipe_ == c.recipe(TensorKind::kCodes) && scales_recipe_ == c.recipe(TensorKind::kScales))) {
      materialized_ = false;
      const size_t code_bytes = c.element_count(TensorKind::kCodes) / 2;
      const size_t scale_bytes = c.element_count(TensorKind::kScales);
      if (absl::Status status = weights_.Reserve(code_bytes, scale_bytes); !status.ok()) return status;
      for (absl::Status status :
           {MaterializeOnDevice(TensorKind::kCodes, *c.recipe(TensorKind::kCodes), weights_.codes(), code_bytes),
            MaterializeOnDevice(TensorKind::kScales, *c.recipe(TensorKind::kScales), weights_.scales(), scale_bytes)}) {
        if (!status.ok()) return status;
      }
      groups_ = c.groups, n_ = c.n, k_ = c.k;
      codes_recipe_ = c.recipe(TensorKind::kCodes);
      scales_recipe_ = c.recipe(TensorKind::kScales);
      materialized_ = true;
    }
    return DeviceReferenceGemmOnDeviceWeights(c.Problem(), weights_, options, output);
  }

 private:
  DeviceWeights weights_;
  bool materialized_ = false;  // weights_ holds the weights below
  int groups_ = 0, n_ = 0, k_ = 0;
  std::optional<TensorRecipe> codes_recipe_, scales_recipe_;
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
