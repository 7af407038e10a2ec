#include "reference/exact_accumulator.h"

#include <bit>
#include <cmath>

namespace mxdiff {
namespace {

using Limbs = std::array<uint64_t, ExactAccumulator::kLimbs>;

// Top set bit index of a nonnegative multi-limb integer, -1 for zero.
int TopBit(const Limbs& limbs) {
  for (int i = ExactAccumulator::kLimbs - 1; i >= 0; --i) {
    if (limbs[i] != 0) return 64 * i + 63 - std::countl_zero(limbs[i]);
  }
  return -1;
}

bool Bit(const Limbs& limbs, int index) { return (limbs[index / 64] >> (index % 64)) & 1; }

// Bits [begin, begin + 64) as an integer (begin >= 0).
uint64_t Extract64(const Limbs& limbs, int begin) {
  const int limb = begin / 64;
  const int offset = begin % 64;
  uint64_t value = limbs[limb] >> offset;
  if (offset != 0 && limb + 1 < ExactAccumulator::kLimbs) value |= limbs[limb + 1] << (64 - offset);
  return value;
}

bool AnyBitBelow(const Limbs& limbs, int end) {
  for (int i = 0; i < end / 64; ++i) {
    if (limbs[i] != 0) return true;
  }
  const int rest = end % 64;
  return rest != 0 && (limbs[end / 64] & ((uint64_t(1) << rest) - 1)) != 0;
}

Limbs Negated(const Limbs& limbs) {
  Limbs result;
  unsigned carry = 1;
  for (int i = 0; i < ExactAccumulator::kLimbs; ++i) {
    const uint64_t inverted = ~limbs[i];
    result[i] = inverted + carry;
    carry = carry && result[i] == 0;
  }
  return result;
}

}  // namespace

void ExactAccumulator::AddScaled(uint64_t magnitude, int lsb_exponent, bool negative) {
  if (magnitude == 0) return;
  const int position = lsb_exponent - kLsbExponent;
  const int limb = position / 64;
  const int offset = position % 64;
  uint64_t term[2] = {magnitude << offset, offset == 0 ? 0 : magnitude >> (64 - offset)};
  if (!negative) {
    uint64_t carry = 0;
    for (int i = limb; i < kLimbs; ++i) {
      const uint64_t addend = i - limb < 2 ? term[i - limb] : 0;
      if (addend == 0 && carry == 0 && i - limb >= 2) break;
      uint64_t sum;
      const bool overflow1 = __builtin_add_overflow(limbs_[i], addend, &sum);
      const bool overflow2 = __builtin_add_overflow(sum, carry, &sum);
      limbs_[i] = sum;
      carry = overflow1 || overflow2;
    }
  } else {
    uint64_t borrow = 0;
    for (int i = limb; i < kLimbs; ++i) {
      const uint64_t subtrahend = i - limb < 2 ? term[i - limb] : 0;
      if (subtrahend == 0 && borrow == 0 && i - limb >= 2) break;
      uint64_t difference;
      const bool underflow1 = __builtin_sub_overflow(limbs_[i], subtrahend, &difference);
      const bool underflow2 = __builtin_sub_overflow(difference, borrow, &difference);
      limbs_[i] = difference;
      borrow = underflow1 || underflow2;
    }
  }
}

void ExactAccumulator::AddF32(uint32_t bits) {
  const uint32_t field = (bits >> 23) & 0xFF;
  const uint64_t significand = (bits & 0x7FFFFF) | (field != 0 ? 0x800000u : 0u);
  // A subnormal's significand counts units of 2^-149, like the smallest normal binade's.
  const int lsb_exponent = int(field == 0 ? 1 : field) - 150;
  AddScaled(significand, lsb_exponent, (bits >> 31) != 0);
}

void ExactAccumulator::AddProductF16(uint16_t a, uint16_t b) {
  const auto split = [](uint16_t h, uint64_t& significand, int& lsb_exponent) {
    const int field = (h >> 10) & 0x1F;
    significand = (h & 0x3FF) | (field != 0 ? 0x400u : 0u);
    lsb_exponent = (field == 0 ? 1 : field) - 25;
  };
  uint64_t sa, sb;
  int ea, eb;
  split(a, sa, ea);
  split(b, sb, eb);
  AddScaled(sa * sb, ea + eb, ((a ^ b) & 0x8000) != 0);
}

bool ExactAccumulator::IsZero() const {
  for (uint64_t limb : limbs_) {
    if (limb != 0) return false;
  }
  return true;
}

uint32_t ExactAccumulator::RoundToF32() const {
  const bool negative = IsNegative();
  const Limbs magnitude = negative ? Negated(limbs_) : limbs_;
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

double ExactAccumulator::ToDouble() const {
  const bool negative = IsNegative();
  const Limbs magnitude = negative ? Negated(limbs_) : limbs_;
  const int top = TopBit(magnitude);
  if (top < 0) return 0.0;
  const int begin = top >= 63 ? top - 63 : 0;
  const double value = std::ldexp(double(Extract64(magnitude, begin)), begin + kLsbExponent);
  return negative ? -value : value;
}

}  // namespace mxdiff
