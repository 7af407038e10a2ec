// The exact model: c + a0*b0 + a1*b1 + a2*b2 + a3*b3 summed without error in an
// ExactAccumulator and rounded once to fp32 (nearest even, overflow to Inf).
// Special values follow IEEE 754 for one exact sum: any NaN operand or Inf x 0 gives NaN,
// +Inf together with -Inf gives NaN, otherwise an Inf term wins. An exact zero sum is -0 only
// when c and every product are -0 (IEEE's rule for x + y), else +0.
#include "reference/exact_accumulator.h"
#include "reference/fp16.h"
#include "reference/step_model_internal.h"

namespace mxdiff::internal {

uint32_t StepExact(uint32_t c, StepInputs a, StepInputs b) {
  bool nan = f32_is_nan(c);
  bool positive_inf = c == 0x7F800000;
  bool negative_inf = c == 0xFF800000;
  bool all_negative_zero = c == 0x80000000;
  for (int i = 0; i < 4; ++i) {
    const bool a_inf = (a[i] & 0x7FFF) == 0x7C00;
    const bool b_inf = (b[i] & 0x7FFF) == 0x7C00;
    const bool a_zero = (a[i] & 0x7FFF) == 0;
    const bool b_zero = (b[i] & 0x7FFF) == 0;
    const bool negative = ((a[i] ^ b[i]) & 0x8000) != 0;
    nan |= f16_is_nan(a[i]) || f16_is_nan(b[i]) || (a_inf && b_zero) || (b_inf && a_zero);
    if (a_inf || b_inf) (negative ? negative_inf : positive_inf) = true;
    all_negative_zero &= (a_zero || b_zero) && negative;
  }
  if (nan || (positive_inf && negative_inf)) return kF32CanonicalNaN;
  if (positive_inf) return 0x7F800000;
  if (negative_inf) return 0xFF800000;

  ExactAccumulator sum;
  sum.AddF32(c);
  for (int i = 0; i < 4; ++i) sum.AddProductF16(a[i], b[i]);
  if (sum.IsZero()) return all_negative_zero ? 0x80000000u : 0u;
  return sum.RoundToF32();
}

}  // namespace mxdiff::internal
