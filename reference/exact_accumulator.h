// An exact fixed-point accumulator for sums of fp32 values and fp16 x fp16 products: a
// two's-complement integer of kLimbs 64-bit limbs whose least significant bit is 2^-149 (the
// smallest fp32 subnormal) and whose range reaches beyond 2^230, so any fp32 value, any fp16
// product and sums of up to 2^100 of them are held without rounding. No floating point takes
// part in the sum; only RoundToF32 rounds, once. Header-only and MXDIFF_HD (integer operations
// only) so that the device reference (reference/device/) compiles the same code; ToDouble is
// host only (exact_accumulator.cc).
#pragma once

#include <cstdint>

#include "reference/host_device.h"

namespace mxdiff {

namespace exact_detail {
// Leading zero bits of a nonzero 64-bit value.
MXDIFF_HD int CountLeadingZeros64(uint64_t value) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(value));
#else
  return __builtin_clzll(value);
#endif
}
}  // namespace exact_detail

class ExactAccumulator {
 public:
  static constexpr int kLsbExponent = -149;
  static constexpr int kLimbs = 6;
  static constexpr int kBits = 64 * kLimbs;

  MXDIFF_HD void Clear() {
    for (int i = 0; i < kLimbs; ++i) limbs_[i] = 0;
  }

  // Adds (or subtracts) magnitude x 2^lsb_exponent; lsb_exponent >= kLsbExponent and the value
  // must stay below 2^(kBits - 1 + kLsbExponent - 64), which every fp32 value satisfies.
  MXDIFF_HD void AddScaled(uint64_t magnitude, int lsb_exponent, bool negative) {
    if (magnitude == 0) return;
    const int position = lsb_exponent - kLsbExponent;
    const int limb = position / 64;
    const int offset = position % 64;
    const uint64_t term[2] = {magnitude << offset, offset == 0 ? 0 : magnitude >> (64 - offset)};
    if (!negative) {
      uint64_t carry = 0;
      for (int i = limb; i < kLimbs; ++i) {
        const uint64_t addend = i - limb < 2 ? term[i - limb] : 0;
        if (addend == 0 && carry == 0 && i - limb >= 2) break;
        const uint64_t partial = limbs_[i] + addend;
        const uint64_t sum = partial + carry;
        carry = (partial < addend || sum < partial) ? 1 : 0;
        limbs_[i] = sum;
      }
    } else {
      uint64_t borrow = 0;
      for (int i = limb; i < kLimbs; ++i) {
        const uint64_t subtrahend = i - limb < 2 ? term[i - limb] : 0;
        if (subtrahend == 0 && borrow == 0 && i - limb >= 2) break;
        const uint64_t partial = limbs_[i] - subtrahend;
        const uint64_t difference = partial - borrow;
        borrow = (limbs_[i] < subtrahend || partial < borrow) ? 1 : 0;
        limbs_[i] = difference;
      }
    }
  }

  // Finite fp32 bits (subnormals included); Inf and NaN are the caller's business.
  MXDIFF_HD void AddF32(uint32_t bits) {
    const uint32_t field = (bits >> 23) & 0xFF;
    const uint64_t significand = (bits & 0x7FFFFF) | (field != 0 ? 0x800000u : 0u);
    // A subnormal's significand counts units of 2^-149, like the smallest normal binade's.
    const int lsb_exponent = int(field == 0 ? 1 : field) - 150;
    AddScaled(significand, lsb_exponent, (bits >> 31) != 0);
  }

  // The exact product of two finite fp16 values.
  MXDIFF_HD void AddProductF16(uint16_t a, uint16_t b) {
    uint64_t sa, sb;
    int ea, eb;
    SplitF16(a, sa, ea);
    SplitF16(b, sb, eb);
    AddScaled(sa * sb, ea + eb, ((a ^ b) & 0x8000) != 0);
  }

  MXDIFF_HD bool IsZero() const {
    for (int i = 0; i < kLimbs; ++i) {
      if (limbs_[i] != 0) return false;
    }
    return true;
  }
  MXDIFF_HD bool IsNegative() const { return (limbs_[kLimbs - 1] >> 63) != 0; }

  // Rounds once to fp32, nearest even, overflow to Inf. An exact zero gives +0: the sign of a
  // zero sum is the caller's rule.
  MXDIFF_HD uint32_t RoundToF32() const {
    const bool negative = IsNegative();
    uint64_t magnitude[kLimbs];
    Magnitude(magnitude);
    const uint32_t sign = negative ? 0x80000000u : 0u;
    const int top = TopBit(magnitude);
    if (top < 0) return 0;
    // Below 2^24 units of 2^-149 the value is an exact fp32 (subnormal or the first normal
    // binade) and its bits are the integer itself.
    if (top < 24) return sign | uint32_t(magnitude[0]);
    const int shift = top - 23;
    uint64_t kept = Extract64(magnitude, shift) & 0xFFFFFF;
    const bool half = Bit(magnitude, shift - 1);
    const bool sticky = AnyBitBelow(magnitude, shift - 1);
    if (half && (sticky || (kept & 1))) ++kept;
    // kept carries the implicit bit into the exponent field; a carry out of 24 bits moves
    // to the next binade by itself.
    const uint64_t bits = (uint64_t(shift) << 23) + kept;
    if (bits >= 0x7F800000) return sign | 0x7F800000;
    return sign | uint32_t(bits);
  }

  // An approximation (relative error below 2^-50) for reports and error bounds only (host).
  double ToDouble() const;

 private:
  MXDIFF_HD static void SplitF16(uint16_t h, uint64_t& significand, int& lsb_exponent) {
    const int field = (h >> 10) & 0x1F;
    significand = (h & 0x3FF) | (field != 0 ? 0x400u : 0u);
    lsb_exponent = (field == 0 ? 1 : field) - 25;
  }

  // The absolute value (two's complement negated when negative).
  MXDIFF_HD void Magnitude(uint64_t (&out)[kLimbs]) const {
    if (!IsNegative()) {
      for (int i = 0; i < kLimbs; ++i) out[i] = limbs_[i];
      return;
    }
    unsigned carry = 1;
    for (int i = 0; i < kLimbs; ++i) {
      out[i] = ~limbs_[i] + carry;
      carry = carry && out[i] == 0;
    }
  }

  // Top set bit index of a nonnegative multi-limb integer, -1 for zero.
  MXDIFF_HD static int TopBit(const uint64_t (&limbs)[kLimbs]) {
    for (int i = kLimbs - 1; i >= 0; --i) {
      if (limbs[i] != 0) return 64 * i + 63 - exact_detail::CountLeadingZeros64(limbs[i]);
    }
    return -1;
  }

  MXDIFF_HD static bool Bit(const uint64_t (&limbs)[kLimbs], int index) {
    return (limbs[index / 64] >> (index % 64)) & 1;
  }

  // Bits [begin, begin + 64) as an integer (begin >= 0).
  MXDIFF_HD static uint64_t Extract64(const uint64_t (&limbs)[kLimbs], int begin) {
    const int limb = begin / 64;
    const int offset = begin % 64;
    uint64_t value = limbs[limb] >> offset;
    if (offset != 0 && limb + 1 < kLimbs) value |= limbs[limb + 1] << (64 - offset);
    return value;
  }

  MXDIFF_HD static bool AnyBitBelow(const uint64_t (&limbs)[kLimbs], int end) {
    for (int i = 0; i < end / 64; ++i) {
      if (limbs[i] != 0) return true;
    }
    const int rest = end % 64;
    return rest != 0 && (limbs[end / 64] & ((uint64_t(1) << rest) - 1)) != 0;
  }

  uint64_t limbs_[kLimbs] = {};
};

}  // namespace mxdiff
