#include "kernels/admitted_scales.h"

#include <algorithm>

#include "kernels/moe_layer_plan.h"

namespace mxdiff {

AdmittedScales AdmittedScales::Admit(std::span<const uint8_t> bytes, size_t per_expert) {
  AdmittedScales scales;
  scales.bytes_ = bytes;
  scales.per_expert_ = per_expert == 0 || per_expert > bytes.size() ? bytes.size() : per_expert;
  for (size_t first = 0; first < bytes.size(); first += scales.per_expert_) {
    scales.experts_.push_back(AdmitLayer(bytes.subspan(first, std::min(scales.per_expert_, bytes.size() - first))));
  }
  scales.layer_ = CombineExpertAdmissions(scales.experts_, scales.per_expert_);
  return scales;
}

std::span<const uint8_t> AdmittedScales::expert_bytes(size_t expert) const {
  const size_t first = expert * per_expert_;
  return bytes_.subspan(first, std::min(per_expert_, bytes_.size() - first));
}

bool PreparesTransform(Transform transform, const LayerAdmission& admission) {
  return transform == Transform::kOrdinary || admission.admitted;
}

}  // namespace mxdiff
