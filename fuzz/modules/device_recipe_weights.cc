#include "fuzz/modules/device_recipe_weights.h"

#include "absl/status/status.h"
#include "fuzz/formats/tensor_recipe_device.h"
#include "fuzz/modules/reference_oracle.h"

namespace mxdiff::fuzz {

absl::StatusOr<const DeviceWeights*> DeviceRecipeWeights::Of(const FuzzCase& c) {
  if (!WeightsFromRecipes(c)) return absl::InvalidArgumentError("the case's weights are not recipes");
  if (valid_ && groups_ == c.groups && n_ == c.n && k_ == c.k && codes_recipe_ == c.recipe(TensorKind::kCodes) &&
      scales_recipe_ == c.recipe(TensorKind::kScales)) {
    return &weights_;
  }
  valid_ = false;
  admission_.reset();
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
  valid_ = true;
  ++materializations_;
  return &weights_;
}

absl::StatusOr<const LayerAdmission*> DeviceRecipeWeights::AdmissionOf(const FuzzCase& c) {
  if (absl::StatusOr<const DeviceWeights*> weights = Of(c); !weights.ok()) return weights.status();
  if (!admission_) {
    absl::StatusOr<LayerAdmission> admission = weights_.AdmitScales();
    if (!admission.ok()) return admission.status();
    admission_ = *std::move(admission);
  }
  return &*admission_;
}

}  // namespace mxdiff::fuzz
