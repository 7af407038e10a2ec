// The proven error bound of every step model against the `exact` model (fuzz_reference checks
// it on every case; the Python package's bound mode judges kernels of unknown order by it).
#pragma once

namespace mxdiff {

// |model - exact| <= bound for one output element whose absolute products sum to abs_sum
// over `steps` m8n8k4 steps and `splits` partials. Per step the V100 model's alignment and
// truncation lose at most 13 x 2^-23 of the largest term (for V100, abs_sum counts subnormal
// factors at 2^-14, as its alignment does), the FMA chain 4 roundings, the exact model one;
// each reduction add one rounding.
inline double ModelErrorBound(double abs_sum, int steps, int splits) {
  constexpr double kUnit = 0x1p-24;
  // 27 units per step covers the V100 model (13 x 2^-23 of a term no larger than the running
  // absolute sum, which itself may be 2^-20 above the true one); +1 for the exact model's own
  // rounding; the same pair per reduction add; absolute slack for subnormal flushing.
  return (28.0 * steps + 4.0 * splits + 4.0) * kUnit * abs_sum + (steps + splits) * 0x1p-124;
}

}  // namespace mxdiff
