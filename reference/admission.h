// Fold admission: which raw scale bytes make the folded transform bitwise equal to the
// ordinary one for all 16 codes. Derived by running both transforms, never typed in.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mxdiff {

// admitted[raw] for raw 0..255; computed once from transform.h.
const std::array<bool, 256>& FoldAdmittedBytes();
inline bool FoldAdmitted(uint8_t raw) { return FoldAdmittedBytes()[raw]; }

struct RefusedScale {
  size_t index = 0;  // position in the layer's scale array
  uint8_t raw = 0;
};

struct LayerAdmission {
  bool admitted = true;
  size_t refused_count = 0;           // all refused bytes
  std::vector<RefusedScale> refused;  // the first max_reported of them
  std::string Describe() const;       // "refused: 3 scale bytes outside 113..128, first raw 112 at 17"
};

LayerAdmission AdmitLayer(std::span<const uint8_t> scale_bytes, size_t max_reported = 16);

}  // namespace mxdiff
