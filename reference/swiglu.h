// The clamped SwiGLU of the MoE layer (docs/numerics.md: shapes), the single definition that the CPU
// reference and the CUDA kernels both compile, bit for bit the same on both:
//
//   g = min(gate, L), u = clamp(up, -L, L), out = fp16(silu(g) * u), silu(g) = g / (1 + exp(-g))
//
// Every operation is an IEEE fp32 operation with round to nearest even: adds, multiplies, one
// divide and fused multiply-adds, each spelled out (the `ieee` helpers below). No hardware
// approximation (`ex2.approx`, `__expf`), no fast-math, and nothing left for a compiler to
// contract: on the device the `__f*_rn` intrinsics, which nvcc never fuses or approximates; on
// the host one operation per function, `std::fmaf` for the fused ones (correctly rounded), and
// the translation units that include this header are built with -ffp-contract=off (clang's
// per-statement contraction cannot reach across these functions either). The exponential is
// Cody-Waite range reduction (x = n ln2 + r, |r| <= ln2/2, n by the 1.5 x 2^23 rounding trick)
// and a degree-7 polynomial (Cephes' expf coefficients) in Horner form with fmaf, scaled by 2^n
// through exact power-of-two multiplies. tests/reference/moe_layer_test.cc pins the bits
// (a hash over 16.8 M inputs) and measures the error against float64; the device test
// (tests/kernels/moe_layer_swiglu_test.cc) checks host == device over the same inputs.
//
// Special values, by the formula (reference/README.md, the MoE layer): a NaN gate or up gives
// NaN (canonical 0x7FFF after the fp16 rounding); gate +Inf clamps to L; gate -Inf gives
// silu = -0 (the limit: the formula's -Inf / Inf would be NaN); exp(-g) overflowing to +Inf
// gives g / Inf = -0.
#pragma once

#include <cstdint>

#include "reference/fp16.h"
#include "reference/host_device.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#if defined(__clang__) && !defined(__CUDA_ARCH__)
#define MXDIFF_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define MXDIFF_NO_CONTRACT
#endif

namespace mxdiff {

inline constexpr float kSwigluLimit = 10.0f;  // swiglu_limit of DeepSeek V4 (docs/numerics.md: shapes)

// One IEEE fp32 operation each, round to nearest even, never fused with a neighbour.
namespace ieee {

MXDIFF_HD float add(float a, float b) {
  MXDIFF_NO_CONTRACT
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

MXDIFF_HD float mul(float a, float b) {
  MXDIFF_NO_CONTRACT
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

MXDIFF_HD float div(float a, float b) {
  MXDIFF_NO_CONTRACT
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// a * b + c with one rounding.
MXDIFF_HD float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

}  // namespace ieee

// 2^e as an fp32 for -126 <= e <= 127 (a normal power of two), built from its bits.
MXDIFF_HD float swiglu_pow2(int e) { return bits_to_f32(uint32_t(e + 127) << 23); }

// exp(x) in fp32 from the operations above alone. NaN in, NaN out; +Inf beyond 89 (overflow
// also reaches +Inf through the final multiply), +0 below -104 (exp(-104) is under half the
// smallest subnormal).
MXDIFF_HD float swiglu_exp(float x) {
  if (!(x == x)) return x;
  if (x > 89.0f) return bits_to_f32(0x7F800000u);
  if (x < -104.0f) return 0.0f;
  // n = nearest integer to x / ln2 (ties to even): adding and removing 1.5 x 2^23 rounds away
  // the fraction; |x / ln2| < 151 keeps it exact.
  const float t = ieee::mul(x, 1.44269504088896341f);
  const float n = ieee::add(ieee::add(t, 12582912.0f), -12582912.0f);
  // r = x - n ln2 with ln2 = 0.693359375 - 2.12194440e-4 (the first part has 9 significant
  // bits, so n times it is exact and the first fma is exact too).
  float r = ieee::fma(n, -0.693359375f, x);
  r = ieee::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = ieee::fma(p, r, 1.3981999507e-3f);
  p = ieee::fma(p, r, 8.3334519073e-3f);
  p = ieee::fma(p, r, 4.1665795894e-2f);
  p = ieee::fma(p, r, 1.6666665459e-1f);
  p = ieee::fma(p, r, 5.0000001201e-1f);
  float y = ieee::fma(p, ieee::mul(r, r), r);  // e^r - 1
  y = ieee::add(y, 1.0f);
  int e = int(n);  // -150 .. 128
  // y * 2^e: the first multiply is exact (a normal result), only the last one rounds.
  if (e > 127) {
    y = ieee::mul(y, swiglu_pow2(127));
    e -= 127;
  } else if (e < -126) {
    y = ieee::mul(y, swiglu_pow2(e + 64));
    e = -64;
  }
  return ieee::mul(y, swiglu_pow2(e));
}

// silu(g) = g / (1 + exp(-g)).
MXDIFF_HD float swiglu_silu(float g) {
  if (f32_to_bits(g) == 0xFF800000u) return -0.0f;  // -Inf: the limit, not -Inf / Inf
  return ieee::div(g, ieee::add(1.0f, swiglu_exp(-g)));
}

// One output element of the clamped SwiGLU: fp16 gate and up (W13's output) in, fp16 out. The
// fp16 inputs widen exactly, the clamps are exact, the result is rounded to fp16 once (nearest
// even, canonical NaN).
MXDIFF_HD uint16_t swiglu_f16(uint16_t gate, uint16_t up, float limit) {
  float g = f16_to_f32(gate);
  float u = f16_to_f32(up);
  g = g > limit ? limit : g;  // a NaN compares false and stays NaN
  u = u > limit ? limit : (u < -limit ? -limit : u);
  return f32_to_f16_rne(ieee::mul(swiglu_silu(g), u));
}

}  // namespace mxdiff
