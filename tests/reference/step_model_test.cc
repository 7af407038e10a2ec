#include "reference/step_model.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "reference/fp16.h"
#include "reference/step_model_cases.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

TEST(StepModelTest, NamesRoundTrip) {
  for (StepModel model : kAllStepModels) EXPECT_EQ(ParseStepModel(StepModelName(model)), model);
  EXPECT_EQ(StepModelName(StepModel::kV100), "v100");
  EXPECT_EQ(StepModelName(StepModel::kSm90Emulated), "sm90-emulated");
  EXPECT_EQ(StepModelName(StepModel::kSm90EmulatedFtz), "sm90-emulated-ftz");
  EXPECT_EQ(StepModelName(StepModel::kExact), "exact");
  EXPECT_FALSE(ParseStepModel("V100").has_value());
  EXPECT_FALSE(ParseStepModel("").has_value());
}

class HandPickedTest : public ::testing::TestWithParam<StepModel> {};

// The expected bits and their derivations are in reference/step_model_cases.cc.
TEST_P(HandPickedTest, StepCases) {
  const StepModel model = GetParam();
  for (const StepCase& c : HandPickedStepCases()) {
    EXPECT_EQ(Step(model, c.c, c.a, c.b), c.expected[int(model)]) << std::hex << c.name << ": " << c.why;
  }
}

TEST_P(HandPickedTest, ReduceCases) {
  const StepModel model = GetParam();
  for (const ReduceCase& c : HandPickedReduceCases()) {
    EXPECT_EQ(ReduceAdd(model, c.partial_sum, c.partial), c.expected[int(model)])
        << std::hex << c.name << ": " << c.why;
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, HandPickedTest, ::testing::ValuesIn(kAllStepModels),
                         [](const ::testing::TestParamInfo<StepModel>& info) {
                           std::string name(StepModelName(info.param));
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

// Inputs weighted toward the interesting classes: zeros, subnormals, Inf, NaN, extremes.
uint16_t RandomF16(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return uint16_t(rng() & 0x8000);  // +-0
    case 1:
      return uint16_t((rng() & 0x8000) | (rng() & 0x3FF));  // subnormal
    case 2:
      return uint16_t((rng() & 0x8000) | 0x7C00 | ((rng() % 8 == 0) ? (rng() & 0x3FF) : 0));  // Inf, some NaN
    default:
      return uint16_t(rng() % 0x7C00 | (rng() & 0x8000));  // finite
  }
}

uint32_t RandomF32(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return uint32_t(rng() & 0x80000000);
    case 1:
      return uint32_t((rng() & 0x80000000) | (rng() & 0x7FFFFF));  // subnormal
    case 2:
      return uint32_t((rng() & 0x80000000) | 0x7F800000 | ((rng() % 8 == 0) ? (rng() & 0x7FFFFF) : 0));
    case 3:  // near the products' range, where cancellation happens
      return uint32_t((rng() & 0x807FFFFF) | ((90 + rng() % 70) << 23));
    default:
      return uint32_t(rng());
  }
}

uint32_t Canonical(uint32_t bits) { return f32_is_nan(bits) ? kF32CanonicalNaN : bits; }

// sm90-emulated against the literal nvcc expression with the C library's fused multiply-add.
TEST(StepModelTest, Sm90MatchesFmaChainOnRandomSteps) {
  std::mt19937_64 rng(testing::TestSeed());
  for (int trial = 0; trial < 1000000; ++trial) {
    std::array<uint16_t, 4> a, b;
    for (int i = 0; i < 4; ++i) a[i] = RandomF16(rng), b[i] = RandomF16(rng);
    const uint32_t c = RandomF32(rng);
    float t = std::fmaf(f16_to_f32(a[0]), f16_to_f32(b[0]), 0.0f);
    for (int i = 1; i < 4; ++i) t = std::fmaf(f16_to_f32(a[i]), f16_to_f32(b[i]), t);
    const uint32_t want = Canonical(f32_to_bits(bits_to_f32(c) + t));
    ASSERT_EQ(Step(StepModel::kSm90Emulated, c, a, b), want)
        << std::hex << "c " << c << " trial " << std::dec << trial;
  }
}

// FTZ: flush c, every fma result and the final add result (sign kept).
TEST(StepModelTest, Sm90FtzMatchesFlushedFmaChainOnRandomSteps) {
  std::mt19937_64 rng(testing::TestSeed());
  const auto flush = [](float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; };
  for (int trial = 0; trial < 1000000; ++trial) {
    std::array<uint16_t, 4> a, b;
    for (int i = 0; i < 4; ++i) a[i] = RandomF16(rng), b[i] = RandomF16(rng);
    const uint32_t c = RandomF32(rng);
    float t = flush(std::fmaf(f16_to_f32(a[0]), f16_to_f32(b[0]), 0.0f));
    for (int i = 1; i < 4; ++i) t = flush(std::fmaf(f16_to_f32(a[i]), f16_to_f32(b[i]), t));
    const uint32_t want = Canonical(f32_to_bits(flush(flush(bits_to_f32(c)) + t)));
    ASSERT_EQ(Step(StepModel::kSm90EmulatedFtz, c, a, b), want) << std::hex << "c " << c;
  }
}

// exact against a 128-bit integer sum in units of 2^-60 (products of fp16 are multiples of 2^-48;
// c restricted to [2^-37, 2^33)), converted by GCC's correctly rounded __int128 -> float.
TEST(StepModelTest, ExactMatchesInt128OracleOnRandomSteps) {
  std::mt19937_64 rng(testing::TestSeed());
  for (int trial = 0; trial < 300000; ++trial) {
    std::array<uint16_t, 4> a, b;
    for (int i = 0; i < 4; ++i)
      a[i] = uint16_t(rng() % 0x7C00 | (rng() & 0x8000)), b[i] = uint16_t(rng() % 0x7C00 | (rng() & 0x8000));
    const uint32_t c = rng() % 4 == 0 ? 0 : uint32_t((rng() & 0x807FFFFF) | ((90 + rng() % 70) << 23));
    __int128 sum = 0;
    if (c != 0) {
      const __int128 units = __int128((c & 0x7FFFFF) | 0x800000) << (((c >> 23) & 0xFF) - 150 + 60);
      sum += (c >> 31) ? -units : units;
    }
    for (int i = 0; i < 4; ++i) {
      const auto split = [](uint16_t h, __int128& significand, int& lsb) {
        const int field = (h >> 10) & 0x1F;
        significand = (h & 0x3FF) | (field ? 0x400 : 0);
        lsb = (field ? field : 1) - 25;
      };
      __int128 sa, sb;
      int ea, eb;
      split(a[i], sa, ea);
      split(b[i], sb, eb);
      const __int128 units = (sa * sb) << (ea + eb + 60);
      sum += ((a[i] ^ b[i]) & 0x8000) ? -units : units;
    }
    const uint32_t want = sum == 0 ? 0u : f32_to_bits(std::ldexp(float(sum), -60));
    ASSERT_EQ(Step(StepModel::kExact, c, a, b), want)
        << std::hex << "c " << c << " a0 " << a[0] << " b0 " << b[0];
  }
}

// No model may depend on anything but its inputs: NaN in means NaN out, canonical.
TEST(StepModelTest, EveryModelCanonicalizesNaN) {
  std::mt19937_64 rng(testing::TestSeed());
  for (StepModel model : kAllStepModels) {
    for (int trial = 0; trial < 10000; ++trial) {
      std::array<uint16_t, 4> a, b;
      for (int i = 0; i < 4; ++i) a[i] = RandomF16(rng), b[i] = RandomF16(rng);
      a[rng() % 4] = uint16_t(0x7C01 | (rng() & 0x83FF));  // a NaN factor
      ASSERT_EQ(Step(model, RandomF32(rng), a, b), kF32CanonicalNaN) << StepModelName(model);
    }
  }
}

TEST(StepModelTest, ChainStepsAppliesStepsInAscendingK) {
  // Step 1 leaves 2^11 * 2^12 = 2^23; step 2 adds 0.5 + 0.5 to it.
  const std::array<uint16_t, 8> a = {0x6800, 0, 0, 0, 0x3800, 0x3800, 0, 0};  // 2^11, then 0.5, 0.5
  const std::array<uint16_t, 8> b = {0x6C00, 0, 0, 0, 0x3C00, 0x3C00, 0, 0};  // 2^12, then 1, 1
  // sm90 step 2: the fma chain sums 0.5 + 0.5 = 1 exactly, then 2^23 + 1 is exact: 0x4B000001.
  EXPECT_EQ(ChainSteps(StepModel::kSm90Emulated, 0, a, b), 0x4B000001u);
  // v100 step 2: c = 2^23 aligns the grid to 2^0; each 0.5 truncates to 0: 2^23.
  EXPECT_EQ(ChainSteps(StepModel::kV100, 0, a, b), 0x4B000000u);
  EXPECT_EQ(ChainSteps(StepModel::kExact, 0, a, b), 0x4B000001u);
}

}  // namespace
}  // namespace mxdiff
