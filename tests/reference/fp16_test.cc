#include "reference/fp16.h"

#include <cmath>
#include <iterator>
#include <random>

#include "gtest/gtest.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

TEST(Fp16Test, RoundTripOfAll65536Patterns) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = uint16_t(h);
    const float widened = f16_to_f32(bits);
    if (f16_is_nan(bits)) {
      EXPECT_TRUE(std::isnan(widened)) << std::hex << h;
      EXPECT_EQ(f32_to_f16_rne(widened), kF16CanonicalNaN) << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16_rne(widened), bits) << std::hex << h;
  }
}

// f16_is_inf holds for exactly the two infinities, as their widening says (+-Inf, not NaN).
// The one table of special values holds each class it names, each value once.
TEST(Fp16Test, SpecialValuesTableCoversEveryClassOnce) {
  int zeros = 0, subnormals = 0, infinities = 0, nans = 0, largest = 0;
  for (size_t i = 0; i < std::size(kF16SpecialValues); ++i) {
    const uint16_t h = kF16SpecialValues[i];
    for (size_t j = 0; j < i; ++j) EXPECT_NE(kF16SpecialValues[j], h) << "twice: " << h;
    zeros += (h & 0x7FFF) == 0;
    subnormals += (h & 0x7C00) == 0 && (h & 0x03FF) != 0;
    infinities += f16_is_inf(h);
    nans += f16_is_nan(h);
    largest += (h & 0x7FFF) == 0x7BFF;
  }
  EXPECT_EQ(zeros, 2);
  EXPECT_EQ(subnormals, 5);
  EXPECT_EQ(infinities, 2);
  EXPECT_EQ(nans, 3);
  EXPECT_EQ(largest, 2);
}

TEST(Fp16Test, IsInfHoldsForExactlyTheTwoInfinities) {
  int infinities = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float widened = f16_to_f32(uint16_t(h));
    ASSERT_EQ(f16_is_inf(uint16_t(h)), std::isinf(widened)) << std::hex << h;
    infinities += f16_is_inf(uint16_t(h)) ? 1 : 0;
  }
  EXPECT_EQ(infinities, 2);
  EXPECT_TRUE(f16_is_inf(0x7C00));
  EXPECT_TRUE(f16_is_inf(0xFC00));
}

// Widening against the definition: (-1)^s x 2^(e-15) x (1 + m/1024), subnormals 2^-14 x m/1024.
TEST(Fp16Test, WideningMatchesTheFormatDefinition) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int exponent = (h >> 10) & 0x1F;
    const int mantissa = h & 0x3FF;
    if (exponent == 0x1F) continue;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    const double want = (h & 0x8000) ? -magnitude : magnitude;
    const float got = f16_to_f32(uint16_t(h));
    ASSERT_EQ(double(got), want) << std::hex << h;
    ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
  }
  EXPECT_EQ(f32_to_bits(f16_to_f32(0x7C00)), 0x7F800000u);
  EXPECT_EQ(f32_to_bits(f16_to_f32(0xFC00)), 0xFF800000u);
}

// An independent narrowing oracle in double arithmetic: scale to the fp16 grid of the value's
// binade (2^(e-10) for normals, 2^-24 below 2^-14), round with nearbyint (nearest even), then
// build the bits from the rounded integer.
uint16_t NarrowingOracle(float value) {
  const double magnitude = std::fabs(double(value));
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isinf(value) || magnitude >= 65520.0) return sign | 0x7C00;
  const int exponent = magnitude >= std::ldexp(1.0, -14) ? std::ilogb(magnitude) : -14;
  const double units = std::nearbyint(std::ldexp(magnitude, 10 - exponent));  // <= 2048
  if (exponent == -14) return sign | uint16_t(units);  // subnormal (units < 1024) or 2^-14 (1024)
  if (units == 2048) return sign | uint16_t((exponent + 16) << 10);  // rounded up into the next binade
  return sign | uint16_t(((exponent + 15) << 10) | (uint16_t(units) - 1024));
}

TEST(Fp16Test, NarrowingMatchesOracleOnRandomAndBoundaryValues) {
  std::mt19937 rng{uint32_t(testing::TestSeed())};
  const auto check = [](uint32_t bits) {
    const float value = bits_to_f32(bits);
    const uint16_t got = f32_to_f16_rne(value);
    if (std::isnan(value)) {
      ASSERT_EQ(got, kF16CanonicalNaN);
      return;
    }
    ASSERT_EQ(got, NarrowingOracle(value)) << std::hex << "f32 " << bits;
  };
  for (int i = 0; i < 2000000; ++i) check(uint32_t(rng()));
  // Every fp16 value, the midpoints to its neighbours and one fp32 ulp either side of them.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const float low = f16_to_f32(uint16_t(h));
    const float high = h + 1 < 0x7C00 ? f16_to_f32(uint16_t(h + 1)) : 65520.0f;
    const uint32_t middle = f32_to_bits((low + high) / 2);  // exact: fp16 midpoints fit fp32
    for (uint32_t bits : {f32_to_bits(low), middle - 1, middle, middle + 1}) {
      check(bits);
      check(bits | 0x80000000);
    }
  }
  for (uint32_t bits :
       {0x477FEFFFu, 0x477FF000u, 0x7F800000u, 0x7F7FFFFFu, 0x33000000u, 0x33000001u, 0x32FFFFFFu}) {
    check(bits);
    check(bits | 0x80000000);
  }
}

TEST(Fp16Test, MultiplyRoundsOnceAndCanonicalizesNaN) {
  EXPECT_EQ(f16_mul(0x3C00, 0x3C00), 0x3C00);            // 1 x 1
  EXPECT_EQ(f16_mul(0x7BFF, 0x4000), 0x7C00);            // 65504 x 2 overflows to Inf
  EXPECT_EQ(f16_mul(0x0001, 0x3800), 0x0000);            // 2^-24 x 0.5 = 2^-25: a tie, even is 0
  EXPECT_EQ(f16_mul(0x0003, 0x3800), 0x0002);            // 3 x 2^-25: tie between 1 and 2 units, even 2
  EXPECT_EQ(f16_mul(0x7C00, 0x0000), kF16CanonicalNaN);  // Inf x 0
  EXPECT_EQ(f16_mul(0xFE01, 0x3C00), kF16CanonicalNaN);  // NaN payloads do not survive
  EXPECT_EQ(f16_mul(0x8000, 0x3C00), 0x8000);            // -0 x 1 = -0
}

}  // namespace
}  // namespace mxdiff
