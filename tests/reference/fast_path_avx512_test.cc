// The AVX-512 flavour of the fast path against the scalar definition, bit for bit: its 16-lane
// step on arbitrary inputs, and whole GEMMs for every model, transform and split count on
// problems dense in special values (NaN, Inf, subnormals, -0, every scale byte), with one row
// per group (weights computed in registers) and several (the dequantized panel), N and K that
// leave partial vectors and blocks. The AVX2 flavour (kFastAvx2) is compared on the same
// problems. Skips with a message where the CPU has no AVX-512.
#include <array>
#include <random>

#include "gtest/gtest.h"
#include "reference/fp16.h"
#include "reference/gemm_plan.h"
#include "reference/reference_gemm.h"
#include "reference/step_model_cases.h"
#include "tests/reference/gemm_test_problems.h"
#include "tests/reference/special_values.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

using testing::OwnedProblem;
using testing::SpecialF16;
using testing::SpecialF32;
using testing::SpecialProblem;

constexpr StepModel kWideModels[] = {StepModel::kV100, StepModel::kSm90Emulated, StepModel::kSm90EmulatedFtz};

uint32_t Canonical(uint32_t bits) { return f32_is_nan(bits) ? kF32CanonicalNaN : bits; }

class WideStepTest : public ::testing::TestWithParam<StepModel> {
 protected:
  void SetUp() override {
    if (!ReferenceAvx512PathAvailable())
      GTEST_SKIP() << "no AVX-512 (F, BW, DQ, VL) on this CPU: the AVX-512 fast path does not run here";
  }
};

TEST_P(WideStepTest, RandomStepsEqualStep) {
  const StepModel model = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  for (int trial = 0; trial < 100000; ++trial) {
    uint32_t c[16], d[16];
    uint16_t a[4], b[4][16];
    for (int i = 0; i < 4; ++i) a[i] = SpecialF16(rng);
    for (int lane = 0; lane < 16; ++lane) {
      c[lane] = SpecialF32(rng);
      for (int i = 0; i < 4; ++i) b[i][lane] = SpecialF16(rng);
    }
    ASSERT_TRUE(internal::RunWideStepLanes(model, c, a, b, d));
    for (int lane = 0; lane < 16; ++lane) {
      const std::array<uint16_t, 4> lane_b = {b[0][lane], b[1][lane], b[2][lane], b[3][lane]};
      ASSERT_EQ(Canonical(d[lane]), Step(model, c[lane], std::array<uint16_t, 4>{a[0], a[1], a[2], a[3]}, lane_b))
          << std::hex << "c " << c[lane] << " a " << a[0] << "," << a[1] << "," << a[2] << "," << a[3] << " b "
          << lane_b[0] << "," << lane_b[1] << "," << lane_b[2] << "," << lane_b[3];
    }
  }
}

TEST_P(WideStepTest, HandPickedCasesInEveryLane) {
  const StepModel model = GetParam();
  const auto cases = HandPickedStepCases();
  for (size_t first = 0; first < cases.size(); ++first) {
    for (int lane_of_case = 0; lane_of_case < 16; ++lane_of_case) {
      const StepCase& subject = cases[first];
      uint32_t c[16], d[16];
      uint16_t b[4][16];
      for (int lane = 0; lane < 16; ++lane) {
        const StepCase& source = lane == lane_of_case ? subject : cases[(first + lane + 1) % cases.size()];
        c[lane] = source.c;
        for (int i = 0; i < 4; ++i) b[i][lane] = source.b[i];
      }
      ASSERT_TRUE(internal::RunWideStepLanes(model, c, subject.a.data(), b, d));
      EXPECT_EQ(Canonical(d[lane_of_case]), subject.expected[int(model)])
          << subject.name << " in lane " << lane_of_case << ": " << subject.why;
    }
  }
}

std::string ModelName(const ::testing::TestParamInfo<StepModel>& info) {
  std::string name(StepModelName(info.param));
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

INSTANTIATE_TEST_SUITE_P(WideModels, WideStepTest, ::testing::ValuesIn(kWideModels), ModelName);

struct Compared {
  int problems = 0;
  size_t outputs = 0;
};

void ExpectPathsEqual(const OwnedProblem& p, ReferenceOptions options, Compared& compared) {
  std::vector<uint32_t> scalar, wide, avx2;
  options.path = ReferencePath::kScalar;
  ASSERT_TRUE(ReferenceGemmF32(p.View(), options, scalar).ok());
  options.path = ReferencePath::kFast;
  ASSERT_TRUE(ReferenceGemmF32(p.View(), options, wide).ok());
  options.path = ReferencePath::kFastAvx2;
  ASSERT_TRUE(ReferenceGemmF32(p.View(), options, avx2).ok());
  ASSERT_EQ(scalar.size(), wide.size());
  for (size_t i = 0; i < scalar.size(); ++i) {
    ASSERT_EQ(scalar[i], wide[i]) << std::hex << "AVX-512 path, element " << std::dec << i << " (row "
                                  << i / p.n << ", column " << i % p.n << ") of " << p.row_offsets.back() << " x "
                                  << p.n << ", K " << p.k << ", " << TacticName(options.tactic) << ", model "
                                  << StepModelName(options.model) << ", transform " << int(options.transform);
  }
  ASSERT_EQ(scalar, avx2) << "AVX2 path";
  ++compared.problems;
  compared.outputs += scalar.size();
}

struct PathCase {
  StepModel model;
  Transform transform;
};

class WideGemmTest : public ::testing::TestWithParam<PathCase> {
 protected:
  void SetUp() override {
    if (!ReferenceAvx512PathAvailable())
      GTEST_SKIP() << "no AVX-512 (F, BW, DQ, VL) on this CPU: the AVX-512 fast path does not run here";
  }
};

TEST_P(WideGemmTest, RandomProblemsWithSpecialsEqualScalarPath) {
  const PathCase param = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  Compared compared;
  for (int trial = 0; trial < 60; ++trial) {
    // K up to 40 blocks: the scale bytes' 16-block transposition and its tail; N up to 70:
    // full, partial and empty second vectors.
    const int k = 32 * (1 + int(rng() % 40));
    const int n = 1 + int(rng() % 70);
    const int max_rows = trial % 3 == 0 ? 3 : 1;  // one row per group: weights in registers
    const OwnedProblem p = SpecialProblem(rng, 1 + int(rng() % 3), n, k, max_rows, trial % 2 == 0);
    ReferenceOptions options;
    options.model = param.model;
    options.transform = param.transform;
    options.tactic.cta_k = 4 * (1 + int(rng() % 64));
    options.tactic.splits = 1 + int(rng() % 6);
    options.threads = 1 + int(rng() % 2);
    ExpectPathsEqual(p, options, compared);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(compared.problems, 60);
  std::printf("[ compared ] %d problems, %zu outputs\n", compared.problems, compared.outputs);
}

// The decode shape the oracle spends its time on: 6 experts x 1 row, K = 4096, N = 512, with
// checkpoint-range scales (all blocks take the in-register route) and a sprinkle of specials.
TEST_P(WideGemmTest, DecodeShapeEqualsScalarPath) {
  const PathCase param = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  OwnedProblem p = SpecialProblem(rng, 6, 512, 4096, 1, false);
  p.row_offsets = {0, 1, 2, 3, 4, 5, 6};
  p.activations.resize(6 * 4096);
  for (uint16_t& a : p.activations) a = rng() % 64 == 0 ? SpecialF16(rng) : uint16_t(0x3000 + (rng() & 0x83FF));
  Compared compared;
  for (int splits : {1, 3}) {
    ReferenceOptions options;
    options.model = param.model;
    options.transform = param.transform;
    options.tactic.splits = splits;
    ExpectPathsEqual(p, options, compared);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(WideModelsAndTransforms, WideGemmTest,
                         ::testing::Values(PathCase{StepModel::kV100, Transform::kOrdinary},
                                           PathCase{StepModel::kV100, Transform::kFolded},
                                           PathCase{StepModel::kSm90Emulated, Transform::kOrdinary},
                                           PathCase{StepModel::kSm90Emulated, Transform::kFolded},
                                           PathCase{StepModel::kSm90EmulatedFtz, Transform::kOrdinary},
                                           PathCase{StepModel::kSm90EmulatedFtz, Transform::kFolded}),
                         [](const ::testing::TestParamInfo<PathCase>& info) {
                           std::string name(StepModelName(info.param.model));
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name + (info.param.transform == Transform::kOrdinary ? "_ordinary" : "_folded");
                         });

// The checkpoint's scale bytes (114..126) must take the in-register route for every model and
// transform, or the fast path silently falls back to table lookups (correct, but slow).
TEST(WideTablesTest, CheckpointScaleBytesArePlain) {
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    const internal::WideTables& tables = internal::DequantTableFor(transform).wide;
    EXPECT_LE(tables.plain_low, 114);
    EXPECT_GE(tables.plain_high, 126);
    EXPECT_LE(tables.v100_low, 114);
    EXPECT_GE(tables.v100_high, 126);
  }
}

}  // namespace
}  // namespace mxdiff
