#include "reference/reference_gemm.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "reference/exact_accumulator.h"
#include "reference/fp16.h"
#include "reference/split_plan.h"
#include "tests/reference/gemm_test_problems.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

using testing::OwnedProblem;
using testing::RandomProblem;
using testing::Values;

std::vector<uint32_t> GemmF32(const OwnedProblem& p, const ReferenceOptions& options) {
  std::vector<uint32_t> out;
  const absl::Status status = ReferenceGemmF32(p.View(), options, out);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

uint16_t Weight(const OwnedProblem& p, Transform transform, int group, int n, int k) {
  const size_t code_index = (size_t(group) * p.n + n) * (p.k / 2);
  const size_t scale_index = (size_t(group) * p.n + n) * (p.k / 32) + k / 32;
  return dequantize(transform, unpack_code(p.packed_codes.data() + code_index, k),
                    prepared_scale(transform, p.scale_bytes[scale_index]));
}

int GroupOfRow(const OwnedProblem& p, int row) {
  int group = 0;
  while (p.row_offsets[group + 1] <= row) ++group;
  return group;
}

// Error bound of the reference against the exact dot product, for inputs where no value is
// subnormal, Inf or NaN and nothing overflows (Values::kModerate).
//
// Each model's step computes d = c + sum p_i + e with |e| <= kappa u (|c| + sum |p_i|), u = 2^-23:
//   sm90 (and FTZ, which flushes nothing here: every value is a multiple of 2^-48): four
//     roundings to nearest, each at most u/2 times an intermediate of magnitude at most
//     (1 + u/2)^3 (|c| + sum |p_i|): kappa = 2.0001 <= 3;
//   v100: five terms truncated onto the grid 2^G with 2^G <= u max(|c|, |p_i|) (normal factors
//     have significands >= 1, so 2^(ea+eb) <= |p_i|), each losing less than 2^G, then the sum
//     truncated, losing less than u (1 + 5u)(|c| + sum |p_i|): kappa = 6.0001 <= 7;
//   exact: one rounding to nearest: kappa = 1/2 <= 1.
// Then |d| <= (1 + kappa u)(|c| + sum |p_i|), so within a split of n steps every accumulator
// is at most (1 + kappa u)^n A (A = sum of |p| over the split) and the split's error at most
// kappa u n (1 + kappa u)^n A. The S - 1 reduction adds (nearest, u/2 each) add at most
// (S - 1) (u/2) (1 + u/2)^S (1 + kappa u)^n A. With n <= K/4 and A <= sum over all k of |p|:
//   |f32 - exact| <= (1 + kappa u)^(K/4) (kappa u K/4 + (S - 1)(u/2)(1 + u/2)^S) sum |p|.
double ErrorBound(StepModel model, int k, int splits, double sum_abs_products) {
  const double u = std::ldexp(1.0, -23);
  const double kappa = model == StepModel::kV100 ? 7 : (model == StepModel::kExact ? 1 : 3);
  const double steps = k / 4.0;
  const double bound = std::pow(1 + kappa * u, steps) *
                       (kappa * u * steps + (splits - 1) * (u / 2) * std::pow(1 + u / 2, splits)) *
                       sum_abs_products;
  return bound * (1 + std::ldexp(1.0, -30));  // slack for this double arithmetic itself
}

TEST(ReferenceGemmTest, WithinProvenErrorBoundOfTheExactDotProduct) {
  std::mt19937_64 rng(testing::TestSeed());
  int checked = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int k = 32 * (1 + int(rng() % 48));
    const OwnedProblem p =
        RandomProblem(rng, 1 + int(rng() % 3), 1 + int(rng() % 24), k, 2, Values::kModerate);
    const Transform transform = rng() % 2 ? Transform::kFolded : Transform::kOrdinary;  // equal in 114..126
    for (StepModel model : kAllStepModels) {
      ReferenceOptions options;
      options.model = model;
      options.transform = transform;
      options.tactic.cta_k = 4 * (1 + int(rng() % 64));
      options.tactic.splits = 1 + int(rng() % 8);
      const int splits = effective_splits(k, options.tactic.cta_k, options.tactic.splits);
      const std::vector<uint32_t> f32 = GemmF32(p, options);
      std::vector<uint16_t> f16;
      ASSERT_TRUE(ReferenceGemm(p.View(), options, f16).ok());
      for (int row = 0; row < p.row_offsets.back(); ++row) {
        const int group = GroupOfRow(p, row);
        for (int n = 0; n < p.n; ++n) {
          ExactAccumulator exact;
          double sum_abs = 0;
          for (int kk = 0; kk < k; ++kk) {
            const uint16_t a = p.activations[size_t(row) * k + kk];
            const uint16_t w = Weight(p, transform, group, n, kk);
            exact.AddProductF16(a, w);
            sum_abs += std::fabs(double(f16_to_f32(a)) * double(f16_to_f32(w)));
          }
          const uint32_t got = f32[size_t(row) * p.n + n];
          ExactAccumulator error = exact;
          error.AddF32(got ^ 0x80000000u);  // exact - got, exactly
          const double bound = ErrorBound(model, k, splits, sum_abs);
          ASSERT_LE(std::fabs(error.ToDouble()), bound)
              << StepModelName(model) << " row " << row << " n " << n << " K " << k << " splits " << splits;
          ASSERT_LT(bound, 1e-3 * sum_abs);  // the bound itself says something
          ASSERT_EQ(f16[size_t(row) * p.n + n], f32_to_f16_rne(bits_to_f32(got)));
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 12 * 4);  // every trial checks at least one output per model
}

// Hand-computed: K = 64 of 1 x 1 (code 2, raw 127) gives 64 in every model and split count.
TEST(ReferenceGemmTest, OnesSumExactly) {
  OwnedProblem p;
  p.groups = 1, p.n = 3, p.k = 64;
  p.row_offsets = {0, 1};
  p.activations.assign(64, 0x3C00);
  p.packed_codes.assign(3 * 32, 0x22);
  p.scale_bytes.assign(3 * 2, 127);
  for (StepModel model : kAllStepModels) {
    for (int splits : {1, 2}) {
      for (ReferencePath path : {ReferencePath::kScalar, ReferencePath::kAuto}) {
        ReferenceOptions options;
        options.model = model;
        options.tactic.splits = splits;
        options.path = path;
        std::vector<uint16_t> out;
        ASSERT_TRUE(ReferenceGemm(p.View(), options, out).ok());
        EXPECT_EQ(out, std::vector<uint16_t>(3, 0x5400)) << StepModelName(model);  // 64 = 2^6
      }
    }
  }
}

// Hand-computed, K = 64, one output. Activations: 2^11 at k 0, 0.25 elsewhere. Weights: block 0
// (raw 137: a = 25, scale 2^10) code 6 (4 x 2^10 = 2^12) at k 0 and code 4 (2 x 2^10) elsewhere;
// block 1 (raw 127: scale 1) code 4 (2). Products: k 0: 2^23; k 1..31: 512; k 32..63: 0.5.
// sm90 and exact, one split: step 0 gives 2^23 + 1536, steps 1..7 add 2048 each, steps 8..15
// add 4 x 0.5 = 2 each; every partial sum is an integer below 2^24, so nothing rounds.
// v100, one split: from step 8 on the accumulator (~2^23) sets the grid to 2^0 and each 0.5
// product truncates to 0. With two splits the second split sums its 0.5s from +0 (exactly 16)
// and the reduction adds 16 exactly.
TEST(ReferenceGemmTest, HandComputedMixedMagnitudes) {
  OwnedProblem p;
  p.groups = 1, p.n = 1, p.k = 64;
  p.row_offsets = {0, 1};
  p.activations.assign(64, 0x3400);  // 0.25
  p.activations[0] = 0x6800;         // 2^11
  p.packed_codes.assign(32, 0x44);   // code 4 (2.0) everywhere ...
  p.packed_codes[0] = 0x46;          // ... except k 0: code 6 (4.0)
  p.scale_bytes = {137, 127};        // block 0: 2^10 scale, block 1: 2^0
  // Block 0 weights: 2 x 2^10 = 2048 (k >= 1) and 4 x 2^10 (k 0); block 1 weights 2.
  // Products: k 0: 2^11 x 2^12 = 2^23; k 1..31: 0.25 x 2048 = 512; k 32..63: 0.25 x 2 = 0.5.
  // sm90/exact, one split: 2^23 + 3 x 512 (step 0) + 7 steps x 2048 + 8 steps x 2 = 2^23 + 1536 + 14336 + 16.
  const uint32_t want_sm90 = f32_to_bits(float(8388608 + 1536 + 14336 + 16));
  ReferenceOptions options;
  options.model = StepModel::kSm90Emulated;
  EXPECT_EQ(GemmF32(p, options)[0], want_sm90);
  options.model = StepModel::kExact;
  EXPECT_EQ(GemmF32(p, options)[0], want_sm90);
  // v100: the 0.5 products align to the accumulator's 2^23 (grid 1) and truncate to 0.
  options.model = StepModel::kV100;
  EXPECT_EQ(GemmF32(p, options)[0], f32_to_bits(float(8388608 + 1536 + 14336)));
  // Two splits (k 0..31 and 32..63): the second split sums the 0.5s from +0 to 16, then the
  // reduction adds 16 exactly, so v100 keeps them.
  options.tactic.splits = 2;
  EXPECT_EQ(GemmF32(p, options)[0], want_sm90);
}

struct PathCase {
  StepModel model;
  Transform transform;
};

class FastPathTest : public ::testing::TestWithParam<PathCase> {};

// The vectorized path computes bit-identical fp32 results to the scalar definition, on problems
// with every kind of value, odd N, empty groups, K not a multiple of the panel, many tactics.
TEST_P(FastPathTest, EqualsScalarPathBitForBit) {
  if (!ReferenceFastPathAvailable())
    GTEST_SKIP() << "no AVX2/FMA on this CPU: the fast path is not built to run here";
  const PathCase param = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  const int trials = param.model == StepModel::kExact ? 6 : 16;
  for (int trial = 0; trial < trials; ++trial) {
    const int k = 32 * (1 + int(rng() % 20));
    const Values values = trial % 2 ? Values::kWild : Values::kModerate;
    const OwnedProblem p = RandomProblem(rng, 1 + int(rng() % 3), 1 + int(rng() % 21), k, 3, values);
    ReferenceOptions options;
    options.model = param.model;
    options.transform = param.transform;
    options.tactic.cta_k = 4 * (1 + int(rng() % 64));
    options.tactic.splits = 1 + int(rng() % 6);
    options.path = ReferencePath::kScalar;
    const std::vector<uint32_t> scalar = GemmF32(p, options);
    options.path = ReferencePath::kFast;
    options.threads = 1 + int(rng() % 3);
    const std::vector<uint32_t> fast = GemmF32(p, options);
    ASSERT_EQ(scalar.size(), fast.size());
    for (size_t i = 0; i < scalar.size(); ++i) {
      ASSERT_EQ(scalar[i], fast[i]) << std::hex << "element " << std::dec << i << " of "
                                    << p.row_offsets.back() << " x " << p.n << ", K " << k << ", "
                                    << TacticName(options.tactic);
    }
  }
}

// A v100 problem built to hit its rare branches in the vector code: subnormal fp16 factors,
// accumulators that cancel to exactly zero, and Inf/NaN lanes next to finite ones.
TEST(FastPathTest, V100EdgeValuesEqualScalarPath) {
  if (!ReferenceFastPathAvailable())
    GTEST_SKIP() << "no AVX2/FMA on this CPU: the fast path is not built to run here";
  std::mt19937_64 rng(testing::TestSeed());
  for (int trial = 0; trial < 20; ++trial) {
    OwnedProblem p = RandomProblem(rng, 2, 16, 64, 2, Values::kModerate);
    for (uint16_t& a : p.activations) {
      const uint64_t pick = rng() % 10;
      if (pick == 0) a = uint16_t(rng() & 0x83FF);  // subnormal or zero
      if (pick == 1) a = 0x3C00;                    // 1 (with code pairs 2/10 gives exact cancellation)
      if (pick == 2 && rng() % 20 == 0) a = uint16_t(0x7C00 | (rng() & 0x8000));
    }
    for (uint8_t& byte : p.packed_codes) byte = rng() % 3 == 0 ? uint8_t(0xA2) : byte;  // +1, -1 neighbours
    for (uint8_t& raw : p.scale_bytes) raw = rng() % 4 == 0 ? uint8_t(113) : raw;       // subnormal weights
    ReferenceOptions options;
    options.model = StepModel::kV100;
    options.path = ReferencePath::kScalar;
    const std::vector<uint32_t> scalar = GemmF32(p, options);
    options.path = ReferencePath::kFast;
    ASSERT_EQ(scalar, GemmF32(p, options));
  }
}

INSTANTIATE_TEST_SUITE_P(AllModelsAndTransforms, FastPathTest,
                         ::testing::Values(PathCase{StepModel::kV100, Transform::kOrdinary},
                                           PathCase{StepModel::kV100, Transform::kFolded},
                                           PathCase{StepModel::kSm90Emulated, Transform::kOrdinary},
                                           PathCase{StepModel::kSm90Emulated, Transform::kFolded},
                                           PathCase{StepModel::kSm90EmulatedFtz, Transform::kOrdinary},
                                           PathCase{StepModel::kSm90EmulatedFtz, Transform::kFolded},
                                           PathCase{StepModel::kExact, Transform::kOrdinary},
                                           PathCase{StepModel::kExact, Transform::kFolded}),
                         [](const ::testing::TestParamInfo<PathCase>& info) {
                           std::string name =
                               std::string(StepModelName(info.param.model)) +
                               (info.param.transform == Transform::kFolded ? "_folded" : "_ordinary");
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

TEST(ReferenceGemmTest, TraceEndsWithTheGemmResult) {
  std::mt19937_64 rng(testing::TestSeed());
  const OwnedProblem p = RandomProblem(rng, 2, 5, 320, 2, Values::kModerate);
  for (StepModel model : kAllStepModels) {
    ReferenceOptions options;
    options.model = model;
    options.tactic.cta_k = 32;
    options.tactic.splits = 3;
    const std::vector<uint32_t> f32 = GemmF32(p, options);
    std::vector<uint16_t> f16;
    ASSERT_TRUE(ReferenceGemm(p.View(), options, f16).ok());
    for (int row = 0; row < p.row_offsets.back(); ++row) {
      for (int n = 0; n < p.n; ++n) {
        absl::StatusOr<ElementTrace> trace = TraceElement(p.View(), options, row, n);
        ASSERT_TRUE(trace.ok()) << trace.status();
        ASSERT_EQ(trace->steps.size(), size_t(320 / 4 + 2));  // 80 steps and 2 reduction adds
        EXPECT_EQ(trace->steps.back().accumulator, f32[size_t(row) * p.n + n]);
        EXPECT_EQ(trace->steps.back().k, -1);
        EXPECT_EQ(trace->result_f32, f32[size_t(row) * p.n + n]);
        EXPECT_EQ(trace->result_f16, f16[size_t(row) * p.n + n]);
        // Steps within a split ascend by 4 from the split's first k; splits appear in order.
        int expected_k = 0, previous_split = 0;
        for (const TraceStep& step : trace->steps) {
          EXPECT_GE(step.split, previous_split);
          previous_split = step.split;
          if (step.k < 0) continue;
          EXPECT_EQ(step.k, expected_k);
          expected_k += 4;
        }
      }
    }
  }
}

TEST(ReferenceGemmTest, ThreadCountNeverChangesBits) {
  std::mt19937_64 rng(testing::TestSeed());
  const OwnedProblem p = RandomProblem(rng, 3, 37, 256, 3, Values::kWild);
  for (ReferencePath path : {ReferencePath::kScalar, ReferencePath::kAuto}) {
    ReferenceOptions options;
    options.model = StepModel::kV100;
    options.path = path;
    options.threads = 1;
    const std::vector<uint32_t> one = GemmF32(p, options);
    for (int threads : {2, 3, 8}) {
      options.threads = threads;
      EXPECT_EQ(GemmF32(p, options), one) << threads;
    }
  }
}

TEST(ReferenceGemmTest, SplitCountChangesBits) {
  std::mt19937_64 rng(testing::TestSeed());
  const OwnedProblem p = RandomProblem(rng, 2, 64, 2048, 2, Values::kModerate);
  ReferenceOptions options;
  options.tactic.splits = 1;
  const std::vector<uint32_t> one = GemmF32(p, options);
  options.tactic.splits = 7;
  EXPECT_NE(GemmF32(p, options), one) << "docs/numerics.md: reduction order: the split count changes the bits";
}

TEST(ReferenceGemmTest, RejectsBadProblemsAndTactics) {
  std::mt19937_64 rng(1);
  OwnedProblem p = RandomProblem(rng, 2, 4, 64, 2, Values::kModerate);
  std::vector<uint16_t> out;
  ReferenceOptions options;
  ASSERT_TRUE(ReferenceGemm(p.View(), options, out).ok());

  OwnedProblem bad_k = p;
  bad_k.k = 48;
  EXPECT_EQ(ReferenceGemm(bad_k.View(), options, out).code(), absl::StatusCode::kInvalidArgument);
  OwnedProblem short_codes = p;
  short_codes.packed_codes.pop_back();
  EXPECT_EQ(ReferenceGemm(short_codes.View(), options, out).code(), absl::StatusCode::kInvalidArgument);
  OwnedProblem bad_offsets = p;
  bad_offsets.row_offsets = {0, 3, 1};
  EXPECT_EQ(ReferenceGemm(bad_offsets.View(), options, out).code(), absl::StatusCode::kInvalidArgument);
  ReferenceOptions bad_tactic;
  bad_tactic.tactic.cta_k = 6;
  EXPECT_EQ(ReferenceGemm(p.View(), bad_tactic, out).code(), absl::StatusCode::kInvalidArgument);
  bad_tactic.tactic = Tactic{};
  bad_tactic.tactic.splits = 0;
  EXPECT_EQ(ReferenceGemm(p.View(), bad_tactic, out).code(), absl::StatusCode::kInvalidArgument);
  ReferenceOptions bad_model;
  bad_model.model = StepModel(9);
  EXPECT_EQ(ReferenceGemm(p.View(), bad_model, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TraceElement(p.View(), options, p.row_offsets.back(), 0).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(TraceElement(p.View(), options, 0, p.n).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(TraceElement(p.View(), options, -1, 0).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(ReferenceGemmTest, GroupsWithoutRows) {
  std::mt19937_64 rng(2);
  OwnedProblem p = RandomProblem(rng, 3, 9, 64, 2, Values::kModerate);
  p.row_offsets = {0, 0, 2, 2};
  p.activations.resize(2 * 64);
  for (ReferencePath path : {ReferencePath::kScalar, ReferencePath::kAuto}) {
    ReferenceOptions options;
    options.path = path;
    std::vector<uint16_t> out;
    ASSERT_TRUE(ReferenceGemm(p.View(), options, out).ok());
    EXPECT_EQ(out.size(), size_t(2 * 9));
    absl::StatusOr<ElementTrace> trace = TraceElement(p.View(), options, 1, 8);
    ASSERT_TRUE(trace.ok());
    EXPECT_EQ(trace->result_f16, out[1 * 9 + 8]);
  }
}

}  // namespace
}  // namespace mxdiff
