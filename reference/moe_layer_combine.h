// The routing-weighted sum back into each token's hidden vector, the single definition the
// CPU reference and the combine kernel both compile. For one token and one hidden column, in
// this fixed order (never a tree, never atomics):
//
//   acc = +0
//   acc = fma(w[s], y[s], acc)   for s = 0, 1, ..., top_k - 1  (the routing's slot order; one
//                                rounding each, fp32 round to nearest even)
//   acc = acc + y_shared         (the shared expert, weight 1: added, never multiplied)
//   out = fp16(acc)              (nearest even, canonical NaN)
//
// y[s] is the W2 output row of slot s (fp16, widened exactly), w[s] its fp32 routing weight
// as given (any bits: zeros, subnormals, huge values, Inf and NaN go through the same fma).
#pragma once

#include <cstdint>

#include "reference/fp16.h"
#include "reference/host_device.h"
#include "reference/swiglu.h"

namespace mxdiff {

MXDIFF_HD float moe_combine_slot(float acc, float weight, uint16_t y) {
  return ieee::fma(weight, f16_to_f32(y), acc);
}

MXDIFF_HD float moe_combine_shared(float acc, uint16_t y) { return ieee::add(acc, f16_to_f32(y)); }

}  // namespace mxdiff
