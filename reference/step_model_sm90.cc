// sm90-emulated and its FTZ flavour (docs/numerics.md: one m8n8k4 step): nvcc 13 emulates the m8n8k4 step with
//   d = c + fma(a3,b3, fma(a2,b2, fma(a1,b1, fma(a0,b0, +0))))
// in IEEE fp32, round to nearest even. A product of two fp16 values is exact in fp32 (at most
// 22 significant bits, magnitude within [2^-48, 2^32]), so fma(a, b, t) equals the single
// rounding of (a*b) + t: the code below computes exactly that with a plain multiply and add.
// The first fma adds +0, which turns a -0 product into +0.
#include "reference/step_model_internal.h"

namespace mxdiff::internal {

// The arithmetic is step_model_hd.h's (shared with the device reference).
uint32_t StepSm90(uint32_t c, StepInputs a, StepInputs b) { return hd::StepSm90(c, a, b); }

// --use_fast_math: subnormal fp32 inputs and results of every FFMA/FADD become a zero of the
// same sign. A result is flushed when it is subnormal after rounding. fp16 operands widen to
// fp32 normals, so only c and the results can flush.
uint32_t StepSm90Ftz(uint32_t c, StepInputs a, StepInputs b) { return hd::StepSm90Ftz(c, a, b); }

uint32_t AddF32Rne(uint32_t x, uint32_t y) { return hd::AddF32Rne(x, y); }

uint32_t AddF32RneFtz(uint32_t x, uint32_t y) { return hd::AddF32RneFtz(x, y); }

}  // namespace mxdiff::internal
