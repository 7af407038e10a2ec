// The fast path's 8-lane step code against Step() on arbitrary inputs (not only the weights the
// GEMM produces): random steps weighted toward special values, and every hand-picked case.
#include <random>

#include "gtest/gtest.h"
#include "reference/fp16.h"
#include "reference/gemm_plan.h"
#include "reference/reference_gemm.h"
#include "reference/step_model_cases.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

uint32_t Canonical(uint32_t bits) { return f32_is_nan(bits) ? kF32CanonicalNaN : bits; }

uint16_t RandomF16(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return uint16_t(rng() & 0x8000);
    case 1:
      return uint16_t((rng() & 0x8000) | (rng() & 0x3FF));
    case 2:
      return rng() % 16 == 0 ? uint16_t(0x7C00 | (rng() & 0x83FF)) : uint16_t(0x3C00 | (rng() & 0x83FF));
    default:
      return uint16_t(rng() % 0x7C00 | (rng() & 0x8000));
  }
}

uint32_t RandomF32(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return uint32_t(rng() & 0x80000000);
    case 1:
      return uint32_t((rng() & 0x80000000) | (rng() & 0x7FFFFF));
    case 2:
      return rng() % 16 == 0 ? uint32_t(0x7F800000 | (rng() & 0x807FFFFF))
                             : uint32_t(rng() & 0x80FFFFFF) | 0x3F000000;
    default:  // the products' range, where alignment and cancellation matter
      return uint32_t((rng() & 0x807FFFFF) | ((90 + rng() % 70) << 23));
  }
}

class FastStepTest : public ::testing::TestWithParam<StepModel> {
 protected:
  void SetUp() override {
    if (!ReferenceFastPathAvailable())
      GTEST_SKIP() << "no AVX2/FMA on this CPU: the fast path is not built to run here";
  }
};

TEST_P(FastStepTest, RandomStepsEqualStep) {
  const StepModel model = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  const int trials = model == StepModel::kExact ? 20000 : 150000;
  for (int trial = 0; trial < trials; ++trial) {
    uint32_t c[8], d[8];
    uint16_t a[4], b[4][8];
    for (int i = 0; i < 4; ++i) a[i] = RandomF16(rng);
    for (int lane = 0; lane < 8; ++lane) {
      c[lane] = RandomF32(rng);
      for (int i = 0; i < 4; ++i) b[i][lane] = RandomF16(rng);
    }
    internal::RunFastStepLanes(model, c, a, b, d);
    for (int lane = 0; lane < 8; ++lane) {
      const std::array<uint16_t, 4> lane_b = {b[0][lane], b[1][lane], b[2][lane], b[3][lane]};
      ASSERT_EQ(Canonical(d[lane]),
                Step(model, c[lane], std::array<uint16_t, 4>{a[0], a[1], a[2], a[3]}, lane_b))
          << std::hex << "c " << c[lane] << " a " << a[0] << "," << a[1] << "," << a[2] << "," << a[3]
          << " b " << lane_b[0] << "," << lane_b[1] << "," << lane_b[2] << "," << lane_b[3];
    }
  }
}

// Each hand-picked case in lane j, the other lanes holding the other cases' b and c: the
// special-value fallback of one lane must not disturb its neighbours.
TEST_P(FastStepTest, HandPickedCasesInEveryLane) {
  const StepModel model = GetParam();
  const auto cases = HandPickedStepCases();
  for (size_t first = 0; first < cases.size(); ++first) {
    for (size_t lane_of_case = 0; lane_of_case < 8; ++lane_of_case) {
      const StepCase& subject = cases[first];
      uint32_t c[8], d[8];
      uint16_t b[4][8];
      for (int lane = 0; lane < 8; ++lane) {
        const StepCase& filler = cases[(first + lane + 1) % cases.size()];
        const StepCase& source = size_t(lane) == lane_of_case ? subject : filler;
        c[lane] = source.c;
        for (int i = 0; i < 4; ++i) b[i][lane] = source.b[i];
      }
      internal::RunFastStepLanes(model, c, subject.a.data(), b, d);
      EXPECT_EQ(Canonical(d[lane_of_case]), subject.expected[int(model)])
          << subject.name << " in lane " << lane_of_case << ": " << subject.why;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, FastStepTest, ::testing::ValuesIn(kAllStepModels),
                         [](const ::testing::TestParamInfo<StepModel>& info) {
                           std::string name(StepModelName(info.param));
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace mxdiff
