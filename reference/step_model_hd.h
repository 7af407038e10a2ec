// The step models and the split reduction add as one definition that the host compiler and
// nvcc both compile (MXDIFF_HD): step_model_*.cc call these for the CPU oracle, and the device
// reference (reference/device/) runs them on the GPU. Raw bits in and out; NaN results are the
// canonical 0x7FFFFFFF. The comments on each model are in step_model_v100.cc,
// step_model_sm90.cc and step_model_exact.cc; the arithmetic is only here.
//
// Floating point: the sm90 models need fp32 fma(a, b, t) of fp16-exact factors (the product is
// exact, so a * b + t rounds once on the host and __fmaf_rn is the same operation on the
// device) and fp32 adds rounded to nearest (__fadd_rn on the device, where nvcc must not
// contract or flush them); the v100 and exact models are integer arithmetic.
#pragma once

#include <climits>
#include <cstdint>

#include "reference/exact_accumulator.h"
#include "reference/fp16.h"
#include "reference/host_device.h"
#include "reference/step_model.h"

namespace mxdiff::hd {

// fp32 subnormal to sign-preserved zero, as the GPU's FTZ mode does to inputs and results.
MXDIFF_HD uint32_t FlushSubnormalF32(uint32_t bits) { return (bits & 0x7F800000) == 0 ? (bits & 0x80000000) : bits; }

MXDIFF_HD uint32_t CanonicalF32(uint32_t bits) {
  return f32_is_nan(bits) ? kF32CanonicalNaN : bits;
}

// (a*b) + t with one rounding; `a*b` is exact for fp16 factors, so this is fma(a, b, t).
MXDIFF_HD float FmaOfExactProduct(float a, float b, float t) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, t);
#else
  return a * b + t;
#endif
}

MXDIFF_HD float AddRne(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(x, y);
#else
  return x + y;
#endif
}

// ---- sm90-emulated and its FTZ flavour (step_model_sm90.cc) ----
MXDIFF_HD uint32_t StepSm90(uint32_t c, const uint16_t* a, const uint16_t* b) {
  float t = FmaOfExactProduct(f16_to_f32(a[0]), f16_to_f32(b[0]), 0.0f);
  for (int i = 1; i < 4; ++i) t = FmaOfExactProduct(f16_to_f32(a[i]), f16_to_f32(b[i]), t);
  return CanonicalF32(f32_to_bits(AddRne(bits_to_f32(c), t)));
}

MXDIFF_HD float FlushedF32(float value) { return bits_to_f32(FlushSubnormalF32(f32_to_bits(value))); }

MXDIFF_HD uint32_t StepSm90Ftz(uint32_t c, const uint16_t* a, const uint16_t* b) {
  float t = FlushedF32(FmaOfExactProduct(f16_to_f32(a[0]), f16_to_f32(b[0]), 0.0f));
  for (int i = 1; i < 4; ++i) t = FlushedF32(FmaOfExactProduct(f16_to_f32(a[i]), f16_to_f32(b[i]), t));
  const float c_in = bits_to_f32(FlushSubnormalF32(c));
  return CanonicalF32(FlushSubnormalF32(f32_to_bits(AddRne(c_in, t))));
}

MXDIFF_HD uint32_t AddF32Rne(uint32_t x, uint32_t y) {
  return CanonicalF32(f32_to_bits(AddRne(bits_to_f32(x), bits_to_f32(y))));
}

MXDIFF_HD uint32_t AddF32RneFtz(uint32_t x, uint32_t y) {
  const float sum = AddRne(bits_to_f32(FlushSubnormalF32(x)), bits_to_f32(FlushSubnormalF32(y)));
  return CanonicalF32(FlushSubnormalF32(f32_to_bits(sum)));
}

// ---- v100 (step_model_v100.cc) ----
namespace v100_detail {

struct Term {
  uint64_t significand;  // integer
  int lsb_exponent;      // the term is significand x 2^lsb_exponent
  bool negative;
};

MXDIFF_HD int MaxInt(int x, int y) { return x > y ? x : y; }

// Special values; returns true and sets `result` when one decides the step.
MXDIFF_HD bool SpecialValueResult(uint32_t c, const uint16_t* a, const uint16_t* b, uint32_t& result) {
  bool nan = f32_is_nan(c);
  bool positive_inf = c == 0x7F800000;
  bool negative_inf = c == 0xFF800000;
  for (int i = 0; i < 4; ++i) {
    const bool a_inf = f16_is_inf(a[i]);
    const bool b_inf = f16_is_inf(b[i]);
    nan |= f16_is_nan(a[i]) || f16_is_nan(b[i]) || (a_inf && (b[i] & 0x7FFF) == 0) ||
           (b_inf && (a[i] & 0x7FFF) == 0);
    if (a_inf || b_inf) (((a[i] ^ b[i]) & 0x8000) != 0 ? negative_inf : positive_inf) = true;
  }
  if (nan || (positive_inf && negative_inf)) {
    result = kF32CanonicalNaN;
  } else if (positive_inf || negative_inf) {
    result = positive_inf ? 0x7F800000u : 0xFF800000u;
  } else {
    return false;
  }
  return true;
}

// Significand (integer, implicit bit included) and the exponent the alignment uses.
MXDIFF_HD void SplitF16(uint16_t h, uint64_t& significand, int& exponent) {
  const int field = (h >> 10) & 0x1F;
  significand = (h & 0x3FF) | (field != 0 ? 0x400u : 0u);
  exponent = MaxInt(field, 1) - 15;  // the significand has 10 fractional bits
}

}  // namespace v100_detail

MXDIFF_HD uint32_t StepV100(uint32_t c, const uint16_t* a, const uint16_t* b) {
  using v100_detail::MaxInt;
  using v100_detail::Term;
  uint32_t special;
  if (v100_detail::SpecialValueResult(c, a, b, special)) return special;

  Term terms[5];
  int count = 0;
  int largest_exponent = INT_MIN;
  for (int i = 0; i < 4; ++i) {
    if ((a[i] & 0x7FFF) == 0 || (b[i] & 0x7FFF) == 0) continue;
    uint64_t sa, sb;
    int ea, eb;
    v100_detail::SplitF16(a[i], sa, ea);
    v100_detail::SplitF16(b[i], sb, eb);
    terms[count++] = Term{sa * sb, ea + eb - 20, ((a[i] ^ b[i]) & 0x8000) != 0};
    largest_exponent = MaxInt(largest_exponent, ea + eb);
  }
  if (count == 0) return (c & 0x7FFFFFFF) == 0 ? 0u : c;
  if ((c & 0x7FFFFFFF) != 0) {
    const int field = int(c >> 23) & 0xFF;
    const int exponent = MaxInt(field, 1) - 127;
    terms[count++] = Term{(c & 0x7FFFFF) | (field != 0 ? 0x800000u : 0u), exponent - 23, (c >> 31) != 0};
    largest_exponent = MaxInt(largest_exponent, exponent);
  }

  // Truncate each term toward zero onto the grid 2^grid and sum exactly (|sum| < 2^28).
  const int grid = largest_exponent - 23;
  int64_t sum = 0;
  for (int i = 0; i < count; ++i) {
    const int shift = terms[i].lsb_exponent - grid;
    const uint64_t aligned =
        shift >= 0 ? terms[i].significand << shift : (-shift >= 64 ? 0 : terms[i].significand >> -shift);
    sum += terms[i].negative ? -int64_t(aligned) : int64_t(aligned);
  }
  if (sum == 0) return 0;

  // Truncate |sum| x 2^grid toward zero to fp32.
  const uint32_t sign = sum < 0 ? 0x80000000u : 0u;
  const uint64_t magnitude = uint64_t(sum < 0 ? -sum : sum);
  const int top = 63 - exact_detail::CountLeadingZeros64(magnitude);
  const int lsb = MaxInt(grid + top - 23, -149);  // the result's unit in the last place
  const uint64_t kept = lsb >= grid ? magnitude >> (lsb - grid) : magnitude << (grid - lsb);
  // kept < 2^24 holds the implicit bit, which carries into the exponent field.
  const int64_t bits = (int64_t(lsb + 149) << 23) + int64_t(kept);
  if (bits >= 0x7F800000) return sign | 0x7F800000;
  return sign | uint32_t(bits);
}

// ---- exact (step_model_exact.cc) ----
MXDIFF_HD uint32_t StepExact(uint32_t c, const uint16_t* a, const uint16_t* b) {
  bool nan = f32_is_nan(c);
  bool positive_inf = c == 0x7F800000;
  bool negative_inf = c == 0xFF800000;
  bool all_negative_zero = c == 0x80000000;
  for (int i = 0; i < 4; ++i) {
    const bool a_inf = f16_is_inf(a[i]);
    const bool b_inf = f16_is_inf(b[i]);
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

// ---- dispatch (step_model.h: Step, ReduceAdd) ----
MXDIFF_HD uint32_t Step(StepModel model, uint32_t c, const uint16_t* a, const uint16_t* b) {
  switch (model) {
    case StepModel::kV100:
      return StepV100(c, a, b);
    case StepModel::kSm90Emulated:
      return StepSm90(c, a, b);
    case StepModel::kSm90EmulatedFtz:
      return StepSm90Ftz(c, a, b);
    case StepModel::kExact:
      return StepExact(c, a, b);
  }
  return kF32CanonicalNaN;  // unreachable for a valid enum
}

MXDIFF_HD uint32_t ReduceAdd(StepModel model, uint32_t partial_sum, uint32_t partial) {
  return model == StepModel::kSm90EmulatedFtz ? AddF32RneFtz(partial_sum, partial) : AddF32Rne(partial_sum, partial);
}

}  // namespace mxdiff::hd
