// A layer's raw scale bytes as the kernels read them: prepared_scale (reference/transform.h, the
// rule) applied to every byte, by a 256-entry table derived from that rule. Host only; the GEMM
// runner and the MoE layer prepare every layer they load with it.
#pragma once

#include <cstdint>
#include <span>

#include "reference/transform.h"

namespace mxdiff {

// `prepared` must be as long as `scale_bytes`.
void PrepareLayerScales(Transform transform, std::span<const uint8_t> scale_bytes, std::span<uint16_t> prepared);

}  // namespace mxdiff
