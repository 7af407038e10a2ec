// fp16 / fp32 bit helpers shared by host and device. Values travel as raw bits (uint16_t,
// uint32_t) so that no platform's half type, NaN payload or flush rule leaks into the
// oracle. The one hardware-specific rule lives here: every NaN result is the canonical
// 0x7FFF (fp16) or 0x7FFFFFFF (fp32), as the H200 produces it (docs/numerics.md: the ordinary transform, §5).
#pragma once

#include <cstdint>
#include <cstring>

#include "reference/host_device.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace mxdiff {

inline constexpr uint16_t kF16CanonicalNaN = 0x7FFF;
inline constexpr uint32_t kF32CanonicalNaN = 0x7FFFFFFF;

// The fp16 special values, one table (as TestFloat keeps one per type) for every generator of
// special inputs to draw from: +-0, subnormals (the smallest of each sign, the largest, a middle
// one), the smallest normal, +-1, 0.5, 2, about 1/3, +-65504, +-Inf, NaNs (quiet, signalling, all
// ones), the largest negative subnormal. The first 19 are fuzz/formats/tensor_recipe.h's
// kInterestingF16 (a view of them, which a recipe indexes): only append.
inline constexpr uint16_t kF16SpecialValues[] = {
    0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0200, 0x0400, 0x3C00, 0xBC00, 0x3800,
    0x4000, 0x3555, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x83FF};

MXDIFF_HD float bits_to_f32(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

MXDIFF_HD uint32_t f32_to_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

MXDIFF_HD bool f16_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }
MXDIFF_HD bool f16_is_inf(uint16_t h) { return (h & 0x7FFF) == 0x7C00; }  // +Inf or -Inf
MXDIFF_HD bool f32_is_nan(uint32_t f) { return (f & 0x7F800000) == 0x7F800000 && (f & 0x007FFFFF) != 0; }

// Exact widening: every fp16 value, subnormals included, is an fp32 normal or zero.
MXDIFF_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  if (exponent == 0x1F) return bits_to_f32(sign | 0x7F800000 | (mantissa << 13));
  if (exponent != 0) return bits_to_f32(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_f32(sign);
  int shift = 0;  // normalize the subnormal: value = mantissa * 2^-24
  while ((mantissa & 0x400) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return bits_to_f32(sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3FF) << 13));
}

// fp32 -> fp16, round to nearest even, subnormals kept, overflow to Inf, NaN canonical.
MXDIFF_HD uint16_t f32_to_f16_rne(float value) {
  const uint32_t f = f32_to_bits(value);
  const uint16_t sign = uint16_t((f >> 16) & 0x8000);
  const uint32_t magnitude = f & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) return kF16CanonicalNaN;
  if (magnitude >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds to Inf
  if (magnitude >= 0x38800000) {                      // fp16 normal range
    const uint32_t rounded = magnitude + 0xFFF + ((magnitude >> 13) & 1);
    return sign | uint16_t((rounded - 0x38000000) >> 13);
  }
  if (magnitude < 0x33000000) return sign;  // below half the smallest subnormal
  // Subnormal: value = m * 2^(e-150) with the implicit bit; result counts units of 2^-24.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t mantissa = (magnitude & 0x7FFFFF) | 0x800000;
  const uint32_t shift = 126 - exponent;  // 14..24 for this range
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t result = kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
  return sign | uint16_t(result);
}

// fp16 x fp16 -> fp16 with one rounding. The fp32 product of two fp16 values is exact
// (22 significant bits, exponents within fp32's normal range), so rounding it once to fp16
// is the correctly rounded fp16 multiply the device performs.
MXDIFF_HD uint16_t f16_mul(uint16_t a, uint16_t b) {
#if defined(__CUDA_ARCH__)
  const __half product = __hmul(__ushort_as_half(a), __ushort_as_half(b));
  const uint16_t bits = __half_as_ushort(product);
  return f16_is_nan(bits) ? kF16CanonicalNaN : bits;
#else
  return f32_to_f16_rne(f16_to_f32(a) * f16_to_f32(b));
#endif
}

}  // namespace mxdiff
