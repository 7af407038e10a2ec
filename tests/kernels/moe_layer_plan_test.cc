// The MoE layer's CUDA-free decisions: the worst routing's M tiles (against a brute force over
// every routing of small layers), the dispatch of its two GEMMs per kernel layer, the layer-wide
// verdict built from per-expert verdicts.
#include "kernels/moe_layer_plan.h"

#include <functional>

#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"

namespace mxdiff {
namespace {

// Every routing of `tokens` tokens (each slot any expert, repeats allowed): the most M tiles.
int BruteForceWorstMTiles(const MoeShape& shape, int tokens, int cta_m) {
  const int entries = tokens * shape.top_k;
  std::vector<int32_t> ids(entries, 0);
  int worst = 0;
  std::function<void(int)> visit = [&](int i) {
    if (i == entries) {
      absl::StatusOr<MoeSchedule> schedule = ScheduleMoeRouting(shape, MoeRouting{tokens, ids, {}});
      worst = std::max(worst, MoeMTiles(schedule->row_offsets, cta_m));
      return;
    }
    for (int e = 0; e < shape.experts; ++e) {
      ids[i] = e;
      visit(i + 1);
    }
  };
  visit(0);
  return worst;
}

TEST(MoeLayerPlanTest, WorstMTilesIsTheMaximumOverEveryRouting) {
  for (int experts : {1, 2, 3, 5}) {
    for (int top_k : {1, 2, 3}) {
      for (int tokens : {1, 2, 3}) {
        if (tokens * top_k > 7) continue;
        for (bool shared : {false, true}) {
          const MoeShape shape{.hidden = 32, .intermediate = 32, .experts = experts, .top_k = top_k,
                               .shared_expert = shared};
          for (int cta_m : {1, 2, 8}) {
            EXPECT_EQ(MoeWorstMTiles(shape, tokens, cta_m), BruteForceWorstMTiles(shape, tokens, cta_m))
                << experts << " experts, top-" << top_k << ", " << tokens << " tokens, shared " << shared
                << ", cta_m " << cta_m;
          }
        }
      }
    }
  }
  // DeepSeek V4 decode: one token is six routed rows and one shared row, seven tiles of any height.
  const MoeShape v4{.hidden = 4096, .intermediate = 512, .experts = 256, .top_k = 6, .shared_expert = true};
  EXPECT_EQ(MoeWorstMTiles(v4, 1, 8), 7);
  EXPECT_EQ(MoeWorstMTiles(v4, 1, 64), 7);
  EXPECT_EQ(MoeWorstMTiles(v4, 4, 8), 25);
  EXPECT_EQ(MoeWorstMTiles(v4, 64, 16), 256 + (384 - 256) / 16 + 4);
  EXPECT_EQ(MoeDispatchRowOffsets(v4, 1), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(MoeMTiles(MoeDispatchRowOffsets(v4, 1), 8), 7);
}

TEST(MoeLayerPlanTest, EachGemmIsRoutedOnItsOwnVerdict) {
  const KernelRegistry registry = BuiltinKernelRegistry();
  const Tactic tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 4};
  const LayerAdmission admitted;
  LayerAdmission refused;
  refused.admitted = false;
  refused.refused_count = 1;
  refused.refused.push_back({5, 112});
  absl::StatusOr<MoeLayerRoutes> routes =
      DecideMoeRoutes(registry, tactic, tactic, MoeLayerRequest{}, admitted, refused);
  ASSERT_TRUE(routes.ok()) << routes.status();
  EXPECT_EQ(routes->w13.variant, Transform::kFolded);
  EXPECT_EQ(routes->w2.variant, Transform::kOrdinary);
  EXPECT_EQ(routes->w2.reason, RouteReason::kLayerRefused);
  routes = DecideMoeRoutes(registry, tactic, tactic,
                           {.transform = TransformRequest::kFolded, .policy = FallbackPolicy::kFailClosed}, admitted,
                           refused);
  ASSERT_FALSE(routes.ok());
  EXPECT_EQ(routes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(routes.status().message().substr(0, 4), "W2: ");
  const Tactic missing{.cta_m = 24, .cta_n = 128, .cta_k = 32};
  routes = DecideMoeRoutes(registry, missing, tactic, MoeLayerRequest{}, admitted, admitted);
  ASSERT_FALSE(routes.ok());
  EXPECT_EQ(routes.status().message().substr(0, 5), "W13: ");
  Tactic wide = tactic;
  wide.swizzle = 6;
  EXPECT_FALSE(DecideMoeRoutes(registry, tactic, wide, MoeLayerRequest{}, admitted, admitted).ok());
}

TEST(MoeLayerPlanTest, LayerVerdictCombinesTheExperts) {
  std::vector<uint8_t> scales(3 * 10, 120);
  scales[14] = 112;
  scales[27] = 200;
  std::vector<LayerAdmission> experts;
  for (int e = 0; e < 3; ++e) experts.push_back(AdmitLayer(std::span(scales).subspan(e * 10, 10)));
  const LayerAdmission combined = CombineExpertAdmissions(experts, 10);
  const LayerAdmission whole = AdmitLayer(scales);
  EXPECT_EQ(combined.admitted, whole.admitted);
  EXPECT_EQ(combined.refused_count, whole.refused_count);
  EXPECT_EQ(combined.Describe(), whole.Describe());
  ASSERT_EQ(combined.refused.size(), 2u);
  EXPECT_EQ(combined.refused[1].index, 27u);
  EXPECT_EQ(combined.refused[1].raw, 200);
  EXPECT_TRUE(CombineExpertAdmissions(std::vector<LayerAdmission>(4), 10).admitted);
}

}  // namespace
}  // namespace mxdiff
