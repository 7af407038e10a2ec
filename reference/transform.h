// The two dequant transforms of the SM70 MXFP4 path (docs/numerics.md: formats and transforms), the single definition
// that the CPU reference and the CUDA kernels both compile.
//
// A scale byte is prepared once per layer into fp16 scale bits (`prepared_scale`); the kernel
// then turns each 4-bit code into an fp16 weight with `dequantize`. Ordinary multiplies by
// 2^14 and then by 2^(a-15); folded multiplies once by 2^(a-1), the 2^14 folded into the
// scale's exponent field. Out-of-range adjusted exponents are kept as the kernels compute
// them: a = 0 flushes (ordinary) or halves (folded); folded a = 17 is Inf, a >= 18 spills
// into the fp16 sign bit.
#pragma once

#include <cstdint>
#include <cstring>

#include "reference/fp16.h"
#include "reference/host_device.h"

namespace mxdiff {

enum class Transform : uint8_t { kOrdinary = 0, kFolded = 1 };
inline constexpr int kTransformCount = 2;

inline constexpr int kBlockK = 32;          // one UE8M0 scale byte per 32 k
inline constexpr uint16_t kF16TwoPow14 = 0x7400;

// E2M1 code placed into fp16 bits: sign -> bit 15, exponent -> bits 11..10, mantissa ->
// bit 9. The result is exactly e2m1(code) x 2^-14.
MXDIFF_HD uint16_t place_e2m1(uint8_t code) {
  return uint16_t(((code & 0x8u) << 12) | ((code & 0x6u) << 9) | ((code & 0x1u) << 9));
}

// a = clamp(raw + 15 - 127, 0, 30): raw <= 112 gives 0, raw >= 142 (0xFF included) gives 30.
MXDIFF_HD uint8_t adjusted_exponent(uint8_t raw) {
  const int a = int(raw) - 112;
  return uint8_t(a < 0 ? 0 : (a > 30 ? 30 : a));
}

MXDIFF_HD uint16_t prepared_scale(Transform transform, uint8_t raw) {
  const uint32_t a = adjusted_exponent(raw);
  // Truncation to 16 bits is the kernel's behaviour: folded a >= 18 lands in the sign bit.
  return transform == Transform::kOrdinary ? uint16_t(a << 10) : uint16_t((a + 14u) << 10);
}

MXDIFF_HD uint16_t dequantize(Transform transform, uint8_t code, uint16_t scale_bits) {
  const uint16_t placed = place_e2m1(code);
  if (transform == Transform::kOrdinary) return f16_mul(f16_mul(placed, kF16TwoPow14), scale_bits);
  return f16_mul(placed, scale_bits);
}

// The kernels' vectorized form of `dequantize`: the eight codes of one little-endian 32-bit word
// of a packed row (k = 0..7 of the word) as four fp16 pairs, pairs[j] holding k = 2j in its low
// half and k = 2j + 1 in its high half, element for element the bits of `dequantize` for any
// scale bits (tests/reference/transform_test.cc checks every code byte and scale byte on the
// CPU, tests/kernels/dequantize_word_test.cc on the device). Each code byte is placed with two
// multiplies that copy its nibbles to bit positions that cannot collide; the device then
// multiplies two halves per instruction, and any NaN is made canonical as f16_mul does (max of
// a NaN with itself is the canonical NaN).
MXDIFF_HD void dequantize_word(Transform transform, uint32_t codes, uint16_t scale_bits,
                               uint32_t (&pairs)[4]) {
  for (int j = 0; j < 4; ++j) {  // constant trip count: nvcc unrolls it
#if defined(__CUDA_ARCH__)
    const uint32_t byte = __byte_perm(codes, 0, 0x4440u | unsigned(j));  // byte j, zero above
#else
    const uint32_t byte = (codes >> (8 * j)) & 0xFFu;
#endif
    const uint32_t placed = ((byte * 0x01001000u) & 0x80008000u) | ((byte * 0x00200200u) & 0x0E000E00u);
#if defined(__CUDA_ARCH__)
    __half2 value;
    memcpy(&value, &placed, sizeof value);
    if (transform == Transform::kOrdinary) {
      value = __hmul2(value, __half2half2(__ushort_as_half(kF16TwoPow14)));
    }
    value = __hmul2(value, __half2half2(__ushort_as_half(scale_bits)));
    value = __hmax2(value, value);  // one instruction: x for any non-NaN x, the canonical 0x7FFF for NaN
    memcpy(&pairs[j], &value, sizeof value);
#else
    uint16_t halves[2] = {uint16_t(placed), uint16_t(placed >> 16)};
    for (uint16_t& half : halves) {
      if (transform == Transform::kOrdinary) half = f16_mul(half, kF16TwoPow14);
      half = f16_mul(half, scale_bits);
    }
    pairs[j] = uint32_t(halves[0]) | (uint32_t(halves[1]) << 16);
#endif
  }
}

// Packed layout: two codes per byte, the low nibble holds the even k element.
MXDIFF_HD uint8_t unpack_code(const uint8_t* packed_row, int k) {
  const uint8_t byte = packed_row[k >> 1];
  return (k & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 0xF);
}

}  // namespace mxdiff
