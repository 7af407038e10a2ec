#include "fuzz/modules/device_recipe_weights.h"

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "fuzz/formats/tensor_recipe_device.h"
#include "reference/device/device_reference.h"

namespace mxdiff::fuzz {
namespace {

class DeviceMaterialization final : public DeviceRecipeWeights {
 public:
  absl::StatusOr<const DeviceCaseWeights*> Of(const FuzzCase& c) override {
    if (!c.WeightsFromRecipes()) return absl::InvalidArgumentError("the case's weights are not recipes");
    if (valid_ && groups_ == c.groups && n_ == c.n && k_ == c.k && codes_recipe_ == c.recipe(TensorKind::kCodes) &&
        scales_recipe_ == c.recipe(TensorKind::kScales)) {
      return &view_;
    }
    Invalidate();  // the buffers are rewritten from here, whether or not this materialization succeeds
    const size_t code_bytes = c.element_count(TensorKind::kCodes) / 2;
    const size_t scale_bytes = c.element_count(TensorKind::kScales);
    if (weights_ == nullptr) weights_ = std::make_unique<DeviceWeights>();  // the device's first use
    DeviceWeights& weights = *weights_;
    if (absl::Status status = weights.Reserve(code_bytes, scale_bytes); !status.ok()) return status;
    for (absl::Status status :
         {MaterializeOnDevice(TensorKind::kCodes, *c.recipe(TensorKind::kCodes), weights.codes(), code_bytes),
          MaterializeOnDevice(TensorKind::kScales, *c.recipe(TensorKind::kScales), weights.scales(), scale_bytes)}) {
      if (!status.ok()) return status;
    }
    absl::StatusOr<LayerAdmission> admission = weights.AdmitScales();
    if (!admission.ok()) return admission.status();
    groups_ = c.groups, n_ = c.n, k_ = c.k;
    codes_recipe_ = c.recipe(TensorKind::kCodes);
    scales_recipe_ = c.recipe(TensorKind::kScales);
    view_ = DeviceCaseWeights{&weights, *std::move(admission), ++materializations_};
    valid_ = true;
    return &view_;
  }
  size_t materializations() const override { return materializations_; }
  void Forget() override { Invalidate(); }

 private:
  // Materialization 0 names no weights: a layer prepared on the earlier ones is stale.
  void Invalidate() {
    valid_ = false;
    view_ = DeviceCaseWeights{};
  }

  std::unique_ptr<DeviceWeights> weights_;  // made on the first Of: a target without a device never touches CUDA
  DeviceCaseWeights view_;
  bool valid_ = false;  // weights_ and view_ hold the weights below
  int groups_ = 0, n_ = 0, k_ = 0;
  std::optional<TensorRecipe> codes_recipe_, scales_recipe_;
  size_t materializations_ = 0;
};

}  // namespace

std::unique_ptr<DeviceRecipeWeights> MakeDeviceRecipeWeights() { return std::make_unique<DeviceMaterialization>(); }

}  // namespace mxdiff::fuzz
