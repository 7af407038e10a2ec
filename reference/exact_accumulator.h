// An exact fixed-point accumulator for sums of fp32 values and fp16 x fp16 products: a
// two's-complement integer of kLimbs 64-bit limbs whose least significant bit is 2^-149 (the
// smallest fp32 subnormal) and whose range reaches beyond 2^230, so any fp32 value, any fp16
// product and sums of up to 2^100 of them are held without rounding. No floating point takes
// part in the sum; only RoundToF32 rounds, once.
#pragma once

#include <array>
#include <cstdint>

namespace mxdiff {

class ExactAccumulator {
 public:
  static constexpr int kLsbExponent = -149;
  static constexpr int kLimbs = 6;
  static constexpr int kBits = 64 * kLimbs;

  void Clear() { limbs_.fill(0); }

  // Adds (or subtracts) magnitude x 2^lsb_exponent; lsb_exponent >= kLsbExponent and the value
  // must stay below 2^(kBits - 1 + kLsbExponent - 64), which every fp32 value satisfies.
  void AddScaled(uint64_t magnitude, int lsb_exponent, bool negative);

  // Finite fp32 bits (subnormals included); Inf and NaN are the caller's business.
  void AddF32(uint32_t bits);
  // The exact product of two finite fp16 values.
  void AddProductF16(uint16_t a, uint16_t b);

  bool IsZero() const;
  bool IsNegative() const { return (limbs_[kLimbs - 1] >> 63) != 0; }

  // Rounds once to fp32, nearest even, overflow to Inf. An exact zero gives +0: the sign of a
  // zero sum is the caller's rule.
  uint32_t RoundToF32() const;

  // An approximation (relative error below 2^-50) for reports and error bounds only.
  double ToDouble() const;

 private:
  std::array<uint64_t, kLimbs> limbs_{};
};

}  // namespace mxdiff
