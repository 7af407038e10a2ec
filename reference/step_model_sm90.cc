// sm90-emulated and its FTZ flavour (docs/numerics.md: one m8n8k4 step): nvcc 13 emulates the m8n8k4 step with
//   d = c + fma(a3,b3, fma(a2,b2, fma(a1,b1, fma(a0,b0, +0))))
// in IEEE fp32, round to nearest even. A product of two fp16 values is exact in fp32 (at most
// 22 significant bits, magnitude within [2^-48, 2^32]), so fma(a, b, t) equals the single
// rounding of (a*b) + t: the code below computes exactly that with a plain multiply and add.
// The first fma adds +0, which turns a -0 product into +0.
#include "reference/fp16.h"
#include "reference/step_model_internal.h"

namespace mxdiff::internal {
namespace {

// (a*b) + t with one rounding; `a*b` is exact, so this is fma(a, b, t).
float FmaOfExactProduct(float a, float b, float t) { return a * b + t; }

}  // namespace

uint32_t StepSm90(uint32_t c, StepInputs a, StepInputs b) {
  float t = FmaOfExactProduct(f16_to_f32(a[0]), f16_to_f32(b[0]), 0.0f);
  for (int i = 1; i < 4; ++i) t = FmaOfExactProduct(f16_to_f32(a[i]), f16_to_f32(b[i]), t);
  return CanonicalF32(f32_to_bits(bits_to_f32(c) + t));
}

// --use_fast_math: subnormal fp32 inputs and results of every FFMA/FADD become a zero of the
// same sign. A result is flushed when it is subnormal after rounding. fp16 operands widen to
// fp32 normals, so only c and the results can flush.
uint32_t StepSm90Ftz(uint32_t c, StepInputs a, StepInputs b) {
  const auto flushed = [](float value) { return bits_to_f32(FlushSubnormalF32(f32_to_bits(value))); };
  float t = flushed(FmaOfExactProduct(f16_to_f32(a[0]), f16_to_f32(b[0]), 0.0f));
  for (int i = 1; i < 4; ++i) t = flushed(FmaOfExactProduct(f16_to_f32(a[i]), f16_to_f32(b[i]), t));
  const float c_in = bits_to_f32(FlushSubnormalF32(c));
  return CanonicalF32(FlushSubnormalF32(f32_to_bits(c_in + t)));
}

uint32_t AddF32Rne(uint32_t x, uint32_t y) {
  return CanonicalF32(f32_to_bits(bits_to_f32(x) + bits_to_f32(y)));
}

uint32_t AddF32RneFtz(uint32_t x, uint32_t y) {
  const float sum = bits_to_f32(FlushSubnormalF32(x)) + bits_to_f32(FlushSubnormalF32(y));
  return CanonicalF32(FlushSubnormalF32(f32_to_bits(sum)));
}

}  // namespace mxdiff::internal
