// The V4-Flash checkpoint's raw UE8M0 scale bytes, 114..126 (docs/numerics.md: transforms): the
// one home of this range. A fact about one model's weights, not a rule: admission is
// FoldAdmitted's business (admission.h, scale_class.h). The fuzz recipes and seed writers
// (fuzz/formats/tensor_recipe.h) and the tests' generators ask it by name; reference/self_check.cc
// types 114..126 on purpose (the spec the checks are held against). Scalars only, so device code
// (fuzz/formats/tensor_recipe_element.h) reads it too.
#pragma once

#include <cstdint>

namespace mxdiff {

inline constexpr uint8_t kCheckpointScaleFirst = 114;
inline constexpr uint8_t kCheckpointScaleLast = 126;
inline constexpr int kCheckpointScaleCount = kCheckpointScaleLast - kCheckpointScaleFirst + 1;  // 13

constexpr bool IsCheckpointScale(uint8_t raw) { return raw >= kCheckpointScaleFirst && raw <= kCheckpointScaleLast; }

// The checkpoint byte that random bits pick: first + bits % count (uniform up to the modulo's bias).
constexpr uint8_t CheckpointScaleOf(uint64_t bits) {
  return uint8_t(kCheckpointScaleFirst + bits % uint64_t(kCheckpointScaleCount));
}

}  // namespace mxdiff
