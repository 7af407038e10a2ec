// The proven error bound of every step model against the `exact` model (fuzz_reference checks
// it on every case; the Python package's bound mode judges kernels of unknown order by it), and
// bound mode's verdict on one output element (docs/numerics.md: "Bound mode").
#pragma once

#include <cmath>
#include <cstdint>

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

// The smallest real that an fp32 rounding to nearest even turns into an infinity.
inline constexpr double kF32OverflowThreshold = 0x1p128 - 0x1p103;

// One output element's products a x w as an fp32 kernel of any order meets them. The products
// are exact in double (an fp16 activation times a weight of at most 4 significant bits, for the
// MX spec's weights too: 2^-152 <= |a x w| < 2^147), their sums are not (BoundVerdict widens by
// the double sum's own error, DoubleSumError).
struct ElementProducts {
  double sum = 0.0;       // the finite products, summed in k order in double
  double abs_sum = 0.0;   // their magnitudes
  double positive = 0.0;  // the positive finite products' sum, and the negative ones' magnitude:
  double negative = 0.0;  // the largest partial sums an fp32 accumulation of either sign can reach
  int count = 0;          // products added
  bool nan = false;       // a NaN factor, or an infinity times zero: the real sum is NaN
  bool plus_inf = false;  // an infinite factor (an Inf activation, a folded-transform Inf weight)
  bool minus_inf = false;
  // A finite weight beyond fp32's range (the MX spec's raw 254 with |e2m1| >= 2): a kernel that
  // holds it in fp32 holds an infinity, which times a nonzero activation is an Inf product and
  // times zero a NaN.
  bool fp32_weight_plus = false, fp32_weight_minus = false, fp32_weight_times_zero = false;

  void Add(double activation, double weight) {
    ++count;
    const double product = activation * weight;
    if (std::isnan(product)) {
      nan = true;
      return;
    }
    if (std::isinf(product)) {
      (product > 0 ? plus_inf : minus_inf) = true;
      return;
    }
    sum += product;
    abs_sum += std::fabs(product);
    (product > 0 ? positive : negative) += std::fabs(product);
    if (std::fabs(weight) >= kF32OverflowThreshold) {
      if (activation == 0.0) {
        fp32_weight_times_zero = true;
      } else {
        (std::signbit(activation) != std::signbit(weight) ? fp32_weight_minus : fp32_weight_plus) = true;
      }
    }
  }

  // |double sum - real sum|: count - 1 roundings of at most 2^-53 of the running magnitude.
  double DoubleSumError() const { return count * 0x1p-53 * abs_sum; }
};

// 0 within, 1 outside the bound, 2 a special (NaN, Inf) of the real sum not kept.
enum class BoundStatus : uint8_t { kWithin = 0, kOutside = 1, kSpecialLost = 2 };

// Bound mode's verdict on the fp16 output `got` (as a double) of an element whose finite real
// sum lies within `bound` of the centre that [low, high] (the fp16-widened window) was built
// around. Besides the window an fp32 kernel of some order may legitimately produce:
// +Inf where an intermediate can reach fp32's overflow (the positive products' sum, plus the
// bound's rounding growth, at or past kF32OverflowThreshold, or a positive product of a weight
// beyond fp32's range), -Inf likewise, NaN where both can or where a weight beyond fp32's range
// meets a zero activation. A finite output never overflowed, so it must lie in the window. For
// fp16 weights (the SM70 transforms) none of those can happen: products are below 2^33.
inline BoundStatus BoundVerdict(const ElementProducts& e, double bound, double low, double high, double got) {
  const bool may_plus = e.plus_inf || e.fp32_weight_plus || e.positive + bound >= kF32OverflowThreshold;
  const bool may_minus = e.minus_inf || e.fp32_weight_minus || e.negative + bound >= kF32OverflowThreshold;
  const bool may_nan = (may_plus && may_minus) || e.fp32_weight_times_zero;
  if (e.nan || (e.plus_inf && e.minus_inf)) return std::isnan(got) ? BoundStatus::kWithin : BoundStatus::kSpecialLost;
  if (e.plus_inf || e.minus_inf) {
    const double infinity = e.plus_inf ? INFINITY : -INFINITY;
    return got == infinity || (std::isnan(got) && may_nan) ? BoundStatus::kWithin : BoundStatus::kSpecialLost;
  }
  if (std::isnan(got)) return may_nan ? BoundStatus::kWithin : BoundStatus::kOutside;
  if ((got == INFINITY && may_plus) || (got == -INFINITY && may_minus)) return BoundStatus::kWithin;
  return got >= low && got <= high ? BoundStatus::kWithin : BoundStatus::kOutside;
}

}  // namespace mxdiff
