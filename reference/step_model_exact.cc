// The exact model: c + a0*b0 + a1*b1 + a2*b2 + a3*b3 summed without error in an
// ExactAccumulator and rounded once to fp32 (nearest even, overflow to Inf).
// Special values follow IEEE 754 for one exact sum: any NaN operand or Inf x 0 gives NaN,
// +Inf together with -Inf gives NaN, otherwise an Inf term wins. An exact zero sum is -0 only
// when c and every product are -0 (IEEE's rule for x + y), else +0.
#include "reference/step_model_internal.h"

namespace mxdiff::internal {

// The arithmetic is step_model_hd.h's (shared with the device reference).
uint32_t StepExact(uint32_t c, StepInputs a, StepInputs b) { return hd::StepExact(c, a, b); }

}  // namespace mxdiff::internal
