// A layer's scale bytes with their admission verdicts, decided once (AdmitLayer, expert by expert)
// where the bytes enter and carried down with them to the device: no later step on the way admits
// the same bytes again. And the one policy by which those verdicts decide which transforms'
// prepared scales go to the device, for the GEMM runner and the MoE layer alike
// (kernels/device_scales.h puts them there). CUDA-free; unit-tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "reference/admission.h"
#include "reference/transform.h"

namespace mxdiff {

class AdmittedScales {
 public:
  // Admits `bytes` in experts of `per_expert` bytes each (the last one may be shorter); 0 or at
  // least the whole size: one expert. The bytes are not copied: they must outlive this object.
  static AdmittedScales Admit(std::span<const uint8_t> bytes, size_t per_expert);

  std::span<const uint8_t> bytes() const { return bytes_; }
  size_t per_expert() const { return per_expert_; }
  // One verdict per expert, over that expert's bytes (refused positions relative to it).
  std::span<const LayerAdmission> experts() const { return experts_; }
  std::span<const uint8_t> expert_bytes(size_t expert) const;
  // The whole layer's verdict: CombineExpertAdmissions of the experts', i.e. AdmitLayer's over all bytes.
  const LayerAdmission& layer() const { return layer_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t per_expert_ = 0;
  std::vector<LayerAdmission> experts_;
  LayerAdmission layer_;
};

// The policy: the ordinary transform's scales are always prepared; the folded ones only for bytes
// whose verdict admits them, so that no folded kernel can ever read scales made from refused bytes
// (in the GEMM runner such a layer has no folded buffer at all).
bool PreparesTransform(Transform transform, const LayerAdmission& admission);

}  // namespace mxdiff
