// The MoE layer's reference: the SwiGLU's bits (pinned by a hash, so that any compiler or flag
// that contracts or reorders an operation fails here, in the gcc and in the clang build), its
// special values, its error against float64; the routing schedule; the fixed order of the
// weighted sum; the layer against a row-by-row recomputation; and the layer's deviation from a
// float64 computation (printed: reference/README.md quotes it).
#include "reference/moe_layer.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "reference/checkpoint_scales.h"
#include "reference/moe_layer_combine.h"
#include "reference/moe_layer_float64.h"
#include "reference/reference_gemm.h"
#include "reference/swiglu.h"
#include "tests/reference/moe_layer_sweep.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

using testing::ExpSweepInputs;

std::vector<uint16_t> SweepUps() { return testing::SwigluSweepUps(); }

uint16_t F16(double value) { return F64ToF16Rne(value); }

TEST(SwigluTest, SpecialValuesFollowTheDocumentedFormula) {
  const uint16_t one = 0x3C00;
  EXPECT_EQ(swiglu_f16(0x0000, one, kSwigluLimit), 0x0000);             // silu(0) = 0
  EXPECT_EQ(swiglu_f16(0x8000, one, kSwigluLimit), 0x8000);             // -0 / 2 = -0
  EXPECT_EQ(swiglu_f16(0x7E00, one, kSwigluLimit), kF16CanonicalNaN);   // NaN gate
  EXPECT_EQ(swiglu_f16(one, 0x7E00, kSwigluLimit), kF16CanonicalNaN);   // NaN up
  EXPECT_EQ(swiglu_f16(0xFC00, one, kSwigluLimit), 0x8000);             // silu(-Inf) = -0 by definition
  EXPECT_EQ(swiglu_f16(0xFC00, 0xBC00, kSwigluLimit), 0x0000);          // -0 x -1
  EXPECT_EQ(swiglu_f16(0xFBFF, one, kSwigluLimit), 0x8000);             // exp(65504) = Inf: g / Inf = -0
  // gate +Inf and 65504 clamp to 10; up +-Inf clamps to +-10.
  const uint16_t silu10 = F16(10.0 / (1.0 + std::exp(-10.0)));
  EXPECT_EQ(swiglu_f16(0x7C00, one, kSwigluLimit), silu10);
  EXPECT_EQ(swiglu_f16(0x7BFF, one, kSwigluLimit), silu10);
  EXPECT_EQ(swiglu_f16(one, 0x7C00, kSwigluLimit), F16(10.0 / (1.0 + std::exp(-1.0))));
  EXPECT_EQ(swiglu_f16(one, 0xFC00, kSwigluLimit), F16(-10.0 / (1.0 + std::exp(-1.0))));
  EXPECT_EQ(swiglu_f16(0x4900, 0x4900, kSwigluLimit), swiglu_f16(0x7C00, 0x7C00, kSwigluLimit));
  // silu(-20) ~ -4.1e-8 is below fp16's smallest subnormal (2^-24 ~ 6e-8) at up = 1: rounds to -0.
  EXPECT_EQ(swiglu_f16(0xCD00, one, kSwigluLimit), F16(-20.0 / (1.0 + std::exp(20.0))));
  // A different limit moves the clamp.
  EXPECT_EQ(swiglu_f16(0x7C00, one, 1.0f), F16(1.0 / (1.0 + std::exp(-1.0))));
}

TEST(SwigluTest, ExpIsWithinAboutAnUlpOfFloat64AndHandlesItsEdges) {
  EXPECT_EQ(f32_to_bits(swiglu_exp(0.0f)), f32_to_bits(1.0f));
  EXPECT_EQ(f32_to_bits(swiglu_exp(-0.0f)), f32_to_bits(1.0f));
  EXPECT_EQ(f32_to_bits(swiglu_exp(bits_to_f32(0x7F800000))), 0x7F800000u);
  EXPECT_EQ(f32_to_bits(swiglu_exp(bits_to_f32(0xFF800000))), 0u);
  EXPECT_TRUE(f32_is_nan(f32_to_bits(swiglu_exp(bits_to_f32(0x7FC00000)))));
  EXPECT_EQ(f32_to_bits(swiglu_exp(88.8f)), 0x7F800000u);  // beyond FLT_MAX through the last multiply
  EXPECT_EQ(f32_to_bits(swiglu_exp(-104.5f)), 0u);
  // Every 64th fp32 bit pattern in [-104, 89] (both signs): ulp error against std::exp in double.
  double max_ulp = 0;
  size_t count = 0, exact = 0;
  for (uint32_t bits = 0; bits < 0x80000000u; bits += 64) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float x = bits_to_f32(bits | sign);
      if (!(x >= -104.0f && x <= 89.0f)) continue;
      const double want = std::exp(double(x));
      const float got = swiglu_exp(x);
      if (want < 1.1754943508222875e-38 || want > 3.4028234663852886e38) continue;  // subnormal or overflow
      const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
      const double error = std::fabs(double(got) - want) / ulp;
      max_ulp = std::max(max_ulp, error);
      exact += got == float(want) ? 1 : 0;
      ++count;
    }
  }
  std::printf("swiglu_exp over %zu inputs: %.3f%% correctly rounded, max %.3f ulp (fp32)\n", count,
              100.0 * double(exact) / double(count), max_ulp);
  EXPECT_GT(count, 20000000u);
  EXPECT_LT(max_ulp, 2.0);
}

// The bits of swiglu_f16 over every fp16 gate x 256 ups and of swiglu_exp over the exp sweep,
// hashed and pinned in tests/reference/moe_layer_sweep.h.
using testing::kSwigluHash;
using testing::kExpHash;

TEST(SwigluTest, BitsArePinnedAcrossCompilers) {
  const std::vector<uint16_t> ups = SweepUps();
  uint64_t hash = kFnv1a64Basis;
  for (uint32_t gate = 0; gate < 65536; ++gate) {
    for (uint16_t up : ups) hash = Fnv1a64MixLittleEndian(hash, swiglu_f16(uint16_t(gate), up, kSwigluLimit), 2);
  }
  uint64_t exp_hash = kFnv1a64Basis;
  for (uint32_t bits : ExpSweepInputs()) exp_hash = Fnv1a64MixLittleEndian(exp_hash, f32_to_bits(swiglu_exp(bits_to_f32(bits))), 4);
  EXPECT_EQ(hash, kSwigluHash) << fmt::format("swiglu hash 0x{:016x}", hash);
  EXPECT_EQ(exp_hash, kExpHash) << fmt::format("exp hash 0x{:016x}", exp_hash);
}

TEST(SwigluTest, DeviationFromFloat64OverEveryGate) {
  const std::vector<uint16_t> ups = SweepUps();
  UlpStats stats;
  for (uint32_t gate = 0; gate < 65536; ++gate) {
    for (uint16_t up : ups) {
      stats.Add(swiglu_f16(uint16_t(gate), up, kSwigluLimit), SwigluF64(uint16_t(gate), up, kSwigluLimit));
    }
  }
  std::printf("swiglu_f16 vs float64 (65536 gates x %zu ups): %s\n", ups.size(), stats.Describe().c_str());
  EXPECT_GT(stats.count, 10000000u);
  EXPECT_LE(stats.max_ulp, 1.0);  // fp32 arithmetic, one fp16 rounding: at worst the other neighbour
  EXPECT_GT(double(stats.correctly_rounded) / double(stats.count), 0.999);
}

TEST(MoeScheduleTest, ExpertOrderIsByExpertThenTokenThenSlot) {
  const MoeShape shape{.hidden = 32, .intermediate = 32, .experts = 4, .top_k = 2, .shared_expert = true};
  const std::vector<int32_t> ids = {1, 3, 1, 1};  // token 0: experts 1, 3; token 1: expert 1 twice
  const std::vector<float> weights(4, 1.0f);
  absl::StatusOr<MoeSchedule> schedule = ScheduleMoeRouting(shape, MoeRouting{2, ids, weights});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(schedule->row_offsets, (std::vector<int32_t>{0, 0, 3, 3, 4, 6}));
  EXPECT_EQ(schedule->entry_row, (std::vector<int32_t>{0, 3, 1, 2}));
  EXPECT_EQ(schedule->row_token, (std::vector<int32_t>{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(schedule->shared_row(shape, 1), 5);

  const MoeShape no_shared{.hidden = 32, .intermediate = 32, .experts = 4, .top_k = 2, .shared_expert = false};
  schedule = ScheduleMoeRouting(no_shared, MoeRouting{2, ids, weights});
  ASSERT_TRUE(schedule.ok());
  EXPECT_EQ(schedule->row_offsets, (std::vector<int32_t>{0, 0, 3, 3, 4}));

  const std::vector<int32_t> bad = {1, 3, 4, 0};
  schedule = ScheduleMoeRouting(shape, MoeRouting{2, bad, weights});
  ASSERT_FALSE(schedule.ok());
  EXPECT_EQ(schedule.status().message(), "token 1 slot 0: expert id 4 is outside 0..3");
  const std::vector<int32_t> negative = {-1, 0};
  EXPECT_FALSE(ScheduleMoeRouting(shape, MoeRouting{1, negative, std::span(weights).first(2)}).ok());
  EXPECT_TRUE(ScheduleMoeRouting(shape, MoeRouting{0, {}, {}}).ok());
}

TEST(MoeCombineTest, TheSlotOrderIsFixedAndFused) {
  // acc = fma(2^24, 1, 0) = 2^24; fma(1, 1, 2^24) = 2^24 + 1 rounds to 2^24 (ties to even);
  // fma(-2^24, 1, 2^24) = 0; + shared 0 = 0. The reverse order would give 1.
  float acc = 0.0f;
  acc = moe_combine_slot(acc, 16777216.0f, 0x3C00);
  acc = moe_combine_slot(acc, 1.0f, 0x3C00);
  acc = moe_combine_slot(acc, -16777216.0f, 0x3C00);
  acc = moe_combine_shared(acc, 0x0000);
  EXPECT_EQ(f32_to_f16_rne(acc), 0x0000);
  // Fused, one rounding: (1 + 2^-23)(1 + 2^-10) = 1 + 2^-10 + 2^-23 + 2^-33; with acc = -(1 + 2^-10
  // + 2^-23) the fma keeps 2^-33, a separate multiply would round it away and give 0.
  EXPECT_EQ(moe_combine_slot(-(1.0f + 0x1p-10f + 0x1p-23f), 1.0f + 0x1p-23f, 0x3C01), 0x1p-33f);
}

struct RandomMoe {
  MoeShape shape;
  int tokens = 0;
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::vector<uint16_t> activations;
  std::vector<uint8_t> w13_codes, w13_scales, w2_codes, w2_scales;

  MoeLayerProblem problem() const {
    return MoeLayerProblem{.shape = shape,
                           .routing = {tokens, ids, weights},
                           .activations = activations,
                           .w13 = {w13_codes, w13_scales},
                           .w2 = {w2_codes, w2_scales}};
  }
};

uint16_t ModerateHalf(std::mt19937_64& rng) {
  return uint16_t(((rng() & 1) << 15) | ((11 + rng() % 8) << 10) | (rng() & 0x3FF));  // 2^-4 .. 2^4
}

RandomMoe MakeRandomMoe(std::mt19937_64& rng, const MoeShape& shape, int tokens) {
  RandomMoe m;
  m.shape = shape;
  m.tokens = tokens;
  for (int t = 0; t < tokens; ++t) {
    for (int s = 0; s < shape.top_k; ++s) {
      m.ids.push_back(int32_t(rng() % shape.experts));  // repeats allowed
      m.weights.push_back(float(rng() % 1000) / 1000.0f);
    }
  }
  m.activations.resize(size_t(tokens) * shape.hidden);
  for (uint16_t& a : m.activations) a = ModerateHalf(rng);
  const size_t groups = size_t(shape.groups());
  m.w13_codes.resize(groups * shape.w13_n() * shape.hidden / 2);
  m.w13_scales.resize(groups * shape.w13_n() * shape.hidden / kBlockK);
  m.w2_codes.resize(groups * shape.hidden * shape.intermediate / 2);
  m.w2_scales.resize(groups * shape.hidden * shape.intermediate / kBlockK);
  for (auto* codes : {&m.w13_codes, &m.w2_codes}) {
    for (uint8_t& c : *codes) c = uint8_t(rng());
  }
  for (auto* scales : {&m.w13_scales, &m.w2_scales}) {
    for (uint8_t& s : *scales) s = CheckpointScaleOf(rng());  // the checkpoint's raw bytes
  }
  return m;
}

MoeLayerOptions Options(Transform transform, int splits) {
  MoeLayerOptions options;
  options.w13 = {transform, Tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = splits}};
  options.w2 = {transform, Tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 2}};
  return options;
}

TEST(MoeLayerReferenceTest, EveryStageEqualsARowByRowRecomputation) {
  std::mt19937_64 rng(testing::TestSeed());
  const MoeShape shape{.hidden = 128, .intermediate = 64, .experts = 8, .top_k = 3, .shared_expert = true};
  for (int tokens : {1, 3}) {
    const RandomMoe m = MakeRandomMoe(rng, shape, tokens);
    const MoeLayerOptions options = Options(Transform::kOrdinary, 3);
    absl::StatusOr<MoeLayerStages> stages = ReferenceMoeLayer(m.problem(), options);
    ASSERT_TRUE(stages.ok()) << stages.status();
    const int rows = stages->schedule.rows();
    ASSERT_EQ(rows, tokens * 4);
    for (int r = 0; r < rows; ++r) {
      int group = 0;
      while (stages->schedule.row_offsets[group + 1] <= r) ++group;
      const int token = stages->schedule.row_token[r];
      // One row, one group: the expert's W13 alone.
      const std::vector<int32_t> one_row = {0, 1};
      const size_t w13_codes = size_t(shape.w13_n()) * shape.hidden / 2, w13_scales = w13_codes * 2 / kBlockK;
      const GroupedProblem w13{.groups = 1,
                               .n = shape.w13_n(),
                               .k = shape.hidden,
                               .row_offsets = one_row,
                               .activations = std::span(m.activations).subspan(size_t(token) * shape.hidden,
                                                                               shape.hidden),
                               .packed_codes = std::span(m.w13_codes).subspan(group * w13_codes, w13_codes),
                               .scale_bytes = std::span(m.w13_scales).subspan(group * w13_scales, w13_scales)};
      std::vector<uint16_t> w13_row;
      ASSERT_TRUE(ReferenceGemm(w13, ReferenceOptions{.tactic = options.w13.tactic}, w13_row).ok());
      EXPECT_TRUE(std::equal(w13_row.begin(), w13_row.end(), stages->w13.begin() + size_t(r) * shape.w13_n()))
          << "row " << r;
      for (int j = 0; j < shape.intermediate; ++j) {
        ASSERT_EQ(stages->activated[size_t(r) * shape.intermediate + j],
                  swiglu_f16(w13_row[j], w13_row[shape.intermediate + j], kSwigluLimit));
      }
    }
    // The combine from the W2 rows, and the whole layer token by token (a token's output does not
    // depend on the other tokens of the batch).
    for (int t = 0; t < tokens; ++t) {
      RandomMoe single = m;
      single.tokens = 1;
      single.ids.assign(m.ids.begin() + t * shape.top_k, m.ids.begin() + (t + 1) * shape.top_k);
      single.weights.assign(m.weights.begin() + t * shape.top_k, m.weights.begin() + (t + 1) * shape.top_k);
      single.activations.assign(m.activations.begin() + size_t(t) * shape.hidden,
                                m.activations.begin() + size_t(t + 1) * shape.hidden);
      absl::StatusOr<MoeLayerStages> alone = ReferenceMoeLayer(single.problem(), options);
      ASSERT_TRUE(alone.ok());
      EXPECT_TRUE(std::equal(alone->output.begin(), alone->output.end(),
                             stages->output.begin() + size_t(t) * shape.hidden))
          << "token " << t;
    }
    std::set<uint16_t> distinct(stages->output.begin(), stages->output.end());
    EXPECT_GT(distinct.size(), 50u);
  }
}

TEST(MoeLayerReferenceTest, RejectsBadShapesAndSizes) {
  std::mt19937_64 rng(1);
  const MoeShape shape{.hidden = 64, .intermediate = 32, .experts = 2, .top_k = 2, .shared_expert = false};
  RandomMoe m = MakeRandomMoe(rng, shape, 2);
  EXPECT_TRUE(ReferenceMoeLayer(m.problem(), Options(Transform::kOrdinary, 1)).ok());
  m.weights.pop_back();
  EXPECT_EQ(ReferenceMoeLayer(m.problem(), Options(Transform::kOrdinary, 1)).status().message(),
            "routing weights has 3 elements, the shape needs 4");
  MoeShape odd = shape;
  odd.intermediate = 48;
  EXPECT_FALSE(ValidateMoeShape(odd).ok());
  odd = shape;
  odd.experts = 0;
  EXPECT_FALSE(ValidateMoeShape(odd).ok());
}

// The deviation of the layer's contract from float64, over random layers at the checkpoint's
// scale bytes: printed (reference/README.md quotes it); the bounds only catch a broken stage.
TEST(MoeLayerDeviationTest, ContractAgainstFloat64) {
  std::mt19937_64 rng(testing::TestSeed());
  const MoeShape shape{.hidden = 512, .intermediate = 128, .experts = 16, .top_k = 6, .shared_expert = true};
  MoeLayerDeviation total;
  for (int round = 0; round < 4; ++round) {
    const RandomMoe m = MakeRandomMoe(rng, shape, 2);
    const MoeLayerOptions options = Options(Transform::kOrdinary, 4);
    absl::StatusOr<MoeLayerStages> stages = ReferenceMoeLayer(m.problem(), options);
    ASSERT_TRUE(stages.ok());
    absl::StatusOr<MoeLayerDeviation> deviation = MeasureMoeLayerDeviation(m.problem(), options, *stages);
    ASSERT_TRUE(deviation.ok()) << deviation.status();
    total.Merge(*deviation);
  }
  std::printf("MoE layer (hidden 512, intermediate 128, 16 experts, top-6 + shared, 8 tokens) vs float64:\n");
  std::printf("  W13 stage:  %s\n  SwiGLU:     %s\n  W2 stage:   %s\n  combine:    %s\n  end to end: %s\n",
              total.w13.Describe().c_str(), total.swiglu.Describe().c_str(), total.w2.Describe().c_str(),
              total.combine.Describe().c_str(), total.end_to_end.Describe().c_str());
  EXPECT_GT(total.w13.count, 0u);
  EXPECT_LE(total.swiglu.max_ulp, 1.0);
  for (const UlpStats* stage : {&total.w13, &total.w2, &total.combine}) {
    EXPECT_GT(double(stage->correctly_rounded) / double(stage->count), 0.9);
  }
}

TEST(UlpStatsTest, CountsRoundingAndSpecials) {
  UlpStats stats;
  stats.Add(0x3C00, 1.0);                   // exact
  stats.Add(0x3C01, 1.0);                   // one ulp off
  stats.Add(0x3C00, 1.0 + 0x1p-11);         // a tie, rounded to even: correct
  stats.Add(0x7C00, 1.0);                   // Inf result: special
  stats.Add(0x3C00, std::nan(""));          // NaN exact: special
  EXPECT_EQ(stats.count, 3u);
  EXPECT_EQ(stats.correctly_rounded, 2u);
  EXPECT_EQ(stats.specials, 2u);
  EXPECT_DOUBLE_EQ(stats.max_ulp, 1.0);
  EXPECT_EQ(F64ToF16Rne(65519.0), 0x7BFF);
  EXPECT_EQ(F64ToF16Rne(65520.0), 0x7C00);
  EXPECT_EQ(F64ToF16Rne(0x1p-25), 0x0000);               // half the smallest subnormal: ties to even 0
  EXPECT_EQ(F64ToF16Rne(0x1p-25 + 0x1p-40), 0x0001);
  EXPECT_EQ(F64ToF16Rne(-3.0 * 0x1p-25), 0x8002);        // 1.5 subnormal steps: to even 2
}

}  // namespace
}  // namespace mxdiff
