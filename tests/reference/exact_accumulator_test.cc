#include "reference/exact_accumulator.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "reference/fp16.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

TEST(ExactAccumulatorTest, ZeroIsPositiveZero) {
  ExactAccumulator sum;
  EXPECT_TRUE(sum.IsZero());
  EXPECT_EQ(sum.RoundToF32(), 0u);
  sum.AddF32(0x3F800000);
  sum.AddF32(0xBF800000);
  EXPECT_TRUE(sum.IsZero());
  EXPECT_EQ(sum.RoundToF32(), 0u);
}

TEST(ExactAccumulatorTest, HoldsTheExtremesWithoutLoss) {
  // FLT_MAX + 2^-149 - FLT_MAX = 2^-149: 277 bits apart, nothing lost.
  ExactAccumulator sum;
  sum.AddF32(0x7F7FFFFF);
  sum.AddF32(0x00000001);
  sum.AddF32(0xFF7FFFFF);
  EXPECT_EQ(sum.RoundToF32(), 0x00000001u);
  // 2 x FLT_MAX rounds to +Inf; -2 x FLT_MAX to -Inf.
  ExactAccumulator big;
  big.AddF32(0x7F7FFFFF);
  big.AddF32(0x7F7FFFFF);
  EXPECT_EQ(big.RoundToF32(), 0x7F800000u);
  ExactAccumulator negative_big;
  negative_big.AddF32(0xFF7FFFFF);
  negative_big.AddF32(0xFF7FFFFF);
  EXPECT_EQ(negative_big.RoundToF32(), 0xFF800000u);
}

TEST(ExactAccumulatorTest, RoundsToNearestEven) {
  // 1 + 2^-24 is a tie: even is 1. 1 + 2^-24 + 2^-149 is above the tie: 1 + 2^-23.
  ExactAccumulator tie;
  tie.AddF32(0x3F800000);
  tie.AddF32(0x33800000);
  EXPECT_EQ(tie.RoundToF32(), 0x3F800000u);
  tie.AddF32(0x00000001);
  EXPECT_EQ(tie.RoundToF32(), 0x3F800001u);
  // (1 + 2^-23) + 2^-24: a tie with odd kept bits rounds up to 1 + 2^-22.
  ExactAccumulator odd;
  odd.AddF32(0x3F800001);
  odd.AddF32(0x33800000);
  EXPECT_EQ(odd.RoundToF32(), 0x3F800002u);
  // (2 - 2^-23) + 2^-24 rounds up across the binade to 2.
  ExactAccumulator carry;
  carry.AddF32(0x3FFFFFFF);
  carry.AddF32(0x33800000);
  EXPECT_EQ(carry.RoundToF32(), 0x40000000u);
  // Subnormal sums are exact: 3 x 2^-149.
  ExactAccumulator tiny;
  for (int i = 0; i < 3; ++i) tiny.AddF32(0x00000001);
  EXPECT_EQ(tiny.RoundToF32(), 0x00000003u);
}

TEST(ExactAccumulatorTest, ProductsOfFp16AreExact) {
  // 65504^2 = 4290774016 exactly; 2^-24 x 2^-24 = 2^-48.
  ExactAccumulator max_product;
  max_product.AddProductF16(0x7BFF, 0x7BFF);
  EXPECT_EQ(max_product.ToDouble(), 65504.0 * 65504.0);
  ExactAccumulator tiny_product;
  tiny_product.AddProductF16(0x0001, 0x8001);
  EXPECT_EQ(tiny_product.ToDouble(), -std::ldexp(1.0, -48));
  EXPECT_EQ(tiny_product.RoundToF32(), 0xA7800000u);  // -2^-48
}

// Oracle: values restricted to lsb >= 2^-60 and magnitude < 2^60 fit a 128-bit integer in units
// of 2^-60; GCC converts __int128 to float correctly rounded (nearest even), and scaling by 2^-60
// is exact in that range.
TEST(ExactAccumulatorTest, MatchesInt128OracleOnRandomSums) {
  std::mt19937_64 rng(testing::TestSeed());
  for (int trial = 0; trial < 20000; ++trial) {
    ExactAccumulator sum;
    __int128 oracle = 0;
    const int terms = 1 + int(rng() % 12);
    for (int t = 0; t < terms; ++t) {
      const int exponent_field = 127 - 37 + int(rng() % 70);  // values in [2^-37, 2^33): lsb >= 2^-60
      const uint32_t bits = uint32_t(rng() & 0x807FFFFF) | (uint32_t(exponent_field) << 23);
      sum.AddF32(bits);
      const __int128 significand = (bits & 0x7FFFFF) | 0x800000;
      const __int128 units = significand << (exponent_field - 150 + 60);
      oracle += (bits >> 31) ? -units : units;
    }
    uint32_t want = 0;
    if (oracle != 0) want = f32_to_bits(std::ldexp(float(oracle), -60));
    ASSERT_EQ(sum.RoundToF32(), want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace mxdiff
