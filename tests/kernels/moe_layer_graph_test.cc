// The MoE decode layer on the GPU against ReferenceMoeLayer, bit for bit at every stage
// (schedule, tile maps, gathered rows, W13, SwiGLU, W2, output), replayed from one CUDA graph
// with new activations, routings, routing weights and weights written into the captured buffers
// between replays, for both variants; routes per kernel layer (admitted, refused, fail-closed);
// refused routings (an expert id out of range, more M tiles than captured).
//
// MXDIFF_MOE_REPLAYS (default 64) sets the replays per variant of the real-shape tests
// (compute-sanitizer runs take fewer).
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"
#include "kernels/moe_layer.h"
#include "reference/admission.h"
#include "reference/split_plan.h"
#include "tests/kernels/gpu_fixture.h"
#include "tests/kernels/moe_layer_support.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

int ReplaysPerVariant() {
  const char* text = std::getenv("MXDIFF_MOE_REPLAYS");
  return text != nullptr && *text != '\0' ? std::max(1, std::atoi(text)) : 64;
}

std::vector<int> ExpertsOf(const MoeShape& shape, const MoeInputs& inputs) {
  std::set<int> experts(inputs.expert_ids.begin(), inputs.expert_ids.end());
  if (shape.shared_expert) experts.insert(shape.experts);
  return {experts.begin(), experts.end()};
}

class MoeLayerGraphTest : public GpuTest {
 protected:
  std::unique_ptr<MoeLayer> CreateLayer(const MoeLayerConfig& config) {
    absl::StatusOr<std::unique_ptr<MoeLayer>> layer = MoeLayer::Create(runner(), config);
    EXPECT_TRUE(layer.ok()) << layer.status();
    return layer.ok() ? *std::move(layer) : nullptr;
  }

  // One replay (graph, or eager) of `inputs` against the reference; "" when every stage is equal.
  std::string ReplayAndCompare(MoeLayer& layer, const HostMoeWeights& weights, const MoeInputs& inputs, bool graph,
                               MoeReplay* replay_out = nullptr) {
    const absl::Status set = layer.SetInputs(inputs.tokens, inputs.activations, inputs.expert_ids, inputs.weights);
    if (!set.ok()) return set.ToString();
    absl::StatusOr<MoeReplay> replay = graph ? layer.Replay() : layer.RunEager();
    if (!replay.ok()) return replay.status().ToString();
    if (replay_out != nullptr) *replay_out = *replay;
    absl::StatusOr<MoeLayerStages> expected = ReferenceMoeLayer(
        Problem(weights, inputs), ReferenceOptionsFor(replay->routes, layer.config().swiglu_limit));
    if (!expected.ok()) return expected.status().ToString();
    MoeDeviceStages device;
    if (absl::Status status = layer.ReadStages(device); !status.ok()) return status.ToString();
    const std::string difference =
        CompareStages(weights.shape, *expected, device, inputs.tokens, layer.config().poison_stages,
                      replay->routes.w13.tactic.cta_m, replay->routes.w2.tactic.cta_m);
    // W2's rows, not the output: extreme routing weights may make a whole token NaN; and not
    // where an activation is Inf or NaN (its rows are NaN through every stage).
    const bool specials = std::any_of(inputs.activations.begin(), inputs.activations.end(),
                                      [](uint16_t a) { return (a & 0x7C00) == 0x7C00; });
    if (difference.empty() && inputs.tokens > 0 && !specials) {
      const size_t distinct = DistinctValues(std::span(device.w2).first(expected->w2.size()));
      if (distinct < 16) return fmt::format("only {} distinct W2 values: a vacuous comparison", distinct);
    }
    return difference;
  }

  // Which scale byte of each GEMM (W13, W2) is held refused now, and the refused value.
  struct Refusals {
    bool refused[2] = {false, false};
    size_t at[2] = {0, 0};
    uint8_t value[2] = {0, 0};
  };

  // Replay i's new weights for the experts `inputs` routes to (scale bytes always, codes of
  // one), uploaded: a refused layer is one scale byte of one expert (routed or not: the verdict
  // is the whole kernel layer's) outside the admitted set for two replays, W13 and W2 in turn.
  void UpdateWeights(FastRng& rng, const MoeShape& shape, const MoeInputs& inputs, int i, HostMoeWeights& weights,
                     MoeLayer& layer, Refusals& refusals) {
    const std::vector<int> routed = ExpertsOf(shape, inputs);
    for (int m = 0; m < 2; ++m) {
      const MoeGemm gemm = MoeGemm(m);
      for (int e : routed) {
        for (uint8_t& raw : weights.scales(gemm, e)) raw = CheckpointScale(rng);
      }
      rng.Fill(weights.codes(gemm, routed[rng() % routed.size()]));
      std::set<int> upload(routed.begin(), routed.end());
      std::vector<uint8_t>& all = gemm == MoeGemm::kW13 ? weights.w13_scales : weights.w2_scales;
      const size_t per_expert = weights.scales_per_expert(gemm);
      if (m == (i / 8) % 2 && i % 8 == 5) {
        static constexpr uint8_t kRefused[] = {112, 129, 0, 255, 140};
        const int expert = rng() % 2 == 0 ? routed[0] : int(rng() % shape.groups());
        refusals.at[m] = size_t(expert) * per_expert + rng() % per_expert;
        refusals.value[m] = kRefused[rng() % 5];
        refusals.refused[m] = true;
      } else if (m == (i / 8) % 2 && i % 8 == 7 && refusals.refused[m]) {
        all[refusals.at[m]] = CheckpointScale(rng);
        refusals.refused[m] = false;
        upload.insert(int(refusals.at[m] / per_expert));
      }
      if (refusals.refused[m]) {
        all[refusals.at[m]] = refusals.value[m];
        upload.insert(int(refusals.at[m] / per_expert));
      }
      for (int e : upload) ASSERT_TRUE(weights.Upload(layer, gemm, e, 1).ok());
      ASSERT_EQ(layer.admission(gemm).admitted, !refusals.refused[m]) << layer.admission(gemm).Describe();
    }
  }

  // Each GEMM's route: folded where wanted and admitted, else ordinary, for the refused layer.
  void ExpectRoutes(const MoeReplay& replay, bool folded_wanted, const Refusals& refusals, int i) {
    for (int m = 0; m < 2; ++m) {
      const Route& route = m == 0 ? replay.routes.w13 : replay.routes.w2;
      const Transform want = folded_wanted && !refusals.refused[m] ? Transform::kFolded : Transform::kOrdinary;
      EXPECT_EQ(route.variant, want) << "replay " << i << " " << MoeGemmName(MoeGemm(m));
      if (folded_wanted && refusals.refused[m]) {
        EXPECT_EQ(route.reason, RouteReason::kLayerRefused);
      }
    }
  }

  // The seed project's gate, at a real per-rank shape: 256 routed experts + the shared one,
  // weights at the checkpoint's scale bytes, one graph per variant, `replays` dynamic replays.
  void DynamicReplays(const char* name, int intermediate) {
    std::mt19937_64 seeder(TestSeed(fmt::format("MoeLayerGraphTest {}", name).c_str()));
    FastRng rng(seeder());
    const MoeShape shape{.hidden = 4096, .intermediate = intermediate, .experts = 256, .top_k = 6,
                         .shared_expert = true};
    HostMoeWeights weights(shape);
    weights.Randomize(rng, 0, shape.groups());
    std::unique_ptr<MoeLayer> layer =
        CreateLayer(MoeLayerConfig{.shape = shape, .max_tokens = 4, .poison_stages = true});
    ASSERT_NE(layer, nullptr);
    for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
      ASSERT_TRUE(weights.Upload(*layer, gemm, 0, shape.groups()).ok());
      ASSERT_TRUE(layer->admission(gemm).admitted);
    }
    const int replays = ReplaysPerVariant();
    const MoeLayerRequest requests[] = {
        {.transform = TransformRequest::kOrdinary, .policy = FallbackPolicy::kFailClosed},
        {.transform = TransformRequest::kAuto, .policy = FallbackPolicy::kFallback}};
    for (const MoeLayerRequest& request : requests) {
      absl::StatusOr<MoeLayerRoutes> captured = layer->Capture(request);
      ASSERT_TRUE(captured.ok()) << captured.status();
      const bool folded_wanted = request.transform != TransformRequest::kOrdinary;
      EXPECT_EQ(captured->w13.variant, folded_wanted ? Transform::kFolded : Transform::kOrdinary);
      EXPECT_EQ(captured->w2.variant, folded_wanted ? Transform::kFolded : Transform::kOrdinary);
      int equal = 0, recaptures = 0, on_refused = 0;
      Refusals refusals;
      for (int i = 0; i < replays; ++i) {
        const int tokens = i % 8 == 0 ? 4 : (rng() % 3 == 0 ? 1 + int(rng() % 4) : 1);
        const RoutingKind kind = RoutingKind(i % 4);
        const MoeInputs inputs = MakeInputs(rng, shape, tokens, kind, i % 5 == 4 ? 2e-5 : 0.0);
        ASSERT_NO_FATAL_FAILURE(UpdateWeights(rng, shape, inputs, i, weights, *layer, refusals));
        MoeReplay replay;
        const std::string difference = ReplayAndCompare(*layer, weights, inputs, /*graph=*/true, &replay);
        EXPECT_EQ(difference, "") << name << " " << TransformRequestName(request.transform) << " replay " << i
                                  << " (" << tokens << " tokens, routing kind " << int(kind) << ")";
        equal += difference.empty() ? 1 : 0;
        recaptures += replay.recaptured ? 1 : 0;
        on_refused += refusals.refused[0] || refusals.refused[1] ? 1 : 0;
        ExpectRoutes(replay, folded_wanted, refusals, i);
      }
      fmt::print("{} {}: {}/{} dynamic graph replays bitwise equal at W13, SwiGLU, W2 and output; {} on a refused "
                 "layer, {} recaptures\n",
                 name, folded_wanted ? "auto (folded where admitted)" : "ordinary", equal, replays, on_refused,
                 recaptures);
      EXPECT_EQ(equal, replays);
    }
  }
};

TEST_F(MoeLayerGraphTest, DynamicReplaysPP2xTP4) { DynamicReplays("PP2xTP4 (W13 K4096 N1024, W2 K512 N4096)", 512); }
TEST_F(MoeLayerGraphTest, DynamicReplaysTP8) { DynamicReplays("TP8 (W13 K4096 N512, W2 K256 N4096)", 256); }

// Every builtin CTA shape and split counts, both variants, W2's tactic drawn apart from W13's
// (another CTA shape and split count: W2's tile map must follow W2's own cta_m); the graph, eager
// launches and the reference agree; decode (1 token), a few tokens, and ten tokens on the same
// experts (groups of more rows than W2's smallest cta_m); with and without the shared expert; with
// dependent launches (the default where the device has them) and plain ones; W13 routing itself
// (the default at these sizes), W13 gathering through the routing kernel's schedule, and the
// routing kernel gathering.
TEST_F(MoeLayerGraphTest, EveryTacticGraphEqualsEagerEqualsReference) {
  std::mt19937_64 seeder(TestSeed("MoeLayerGraphTest.EveryTactic"));
  FastRng rng(seeder());
  for (const auto& [shared, dependent, gather_in_w13, route_in_w13] :
       {std::tuple{true, true, true, true}, {false, true, true, true}, {true, false, true, true},
        {true, true, true, false}, {false, false, true, false}, {true, true, false, false}, {false, false, false, false}}) {
    SCOPED_TRACE(fmt::format("dependent launch {}, gather in W13 {}, route in W13 {}", dependent, gather_in_w13,
                             route_in_w13));
    const MoeShape shape{.hidden = 256, .intermediate = 64, .experts = 16, .top_k = 6, .shared_expert = shared};
    HostMoeWeights weights(shape);
    weights.Randomize(rng, 0, shape.groups());
    std::unique_ptr<MoeLayer> layer = CreateLayer(
        MoeLayerConfig{.shape = shape, .max_tokens = 10, .poison_stages = true, .dependent_launch = dependent,
                       .gather_in_w13 = gather_in_w13, .route_in_w13 = route_in_w13});
    ASSERT_NE(layer, nullptr);
    for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) ASSERT_TRUE(weights.Upload(*layer, gemm, 0, shape.groups()).ok());
    for (const CtaShape& cta : kCtaShapes) {
      for (int splits : {1, 3}) {
        for (TransformRequest transform : {TransformRequest::kOrdinary, TransformRequest::kFolded}) {
          const Tactic tactic{.cta_m = cta.m, .cta_n = cta.n, .cta_k = cta.k, .splits = splits, .swizzle = splits - 1};
          const CtaShape& w2_cta = kCtaShapes[size_t(&cta - kCtaShapes + 1 + splits) % kCtaShapeCount];
          const Tactic w2_tactic{.cta_m = w2_cta.m, .cta_n = w2_cta.n, .cta_k = w2_cta.k, .splits = 4 - splits,
                                 .swizzle = splits % 2};
          const MoeLayerRequest request{.transform = transform, .policy = FallbackPolicy::kFailClosed,
                                        .w13_tactic = tactic, .w2_tactic = w2_tactic};
          absl::StatusOr<MoeLayerRoutes> routes = layer->Capture(request);
          ASSERT_TRUE(routes.ok()) << routes.status();
          for (int tokens : {1, 2, 5, 10}) {
            const RoutingKind kind = tokens == 10 ? RoutingKind::kAllOnOne : RoutingKind((tokens + splits) % 4);
            const MoeInputs inputs = MakeInputs(rng, shape, tokens, kind, 0.0);
            SCOPED_TRACE(fmt::format("shared {} {} W13 {} W2 {} tokens {}", shared, TransformRequestName(transform),
                                     TacticName(tactic), TacticName(w2_tactic), tokens));
            EXPECT_EQ(ReplayAndCompare(*layer, weights, inputs, /*graph=*/true), "");
            EXPECT_EQ(ReplayAndCompare(*layer, weights, inputs, /*graph=*/false), "");
          }
        }
      }
    }
    // No tokens at all: nothing to compute, every stage buffer stays poisoned.
    EXPECT_EQ(ReplayAndCompare(*layer, weights, MakeInputs(rng, shape, 0, RoutingKind::kDistinct, 0.0), true), "");
  }
}

// top_k at the layer's limit (kMaxMoeTopK slots per token), through the routing kernel (too many
// entries for W13 to route itself) and its schedule: graph, eager and reference agree.
TEST_F(MoeLayerGraphTest, TopKAtTheLimitGraphEqualsEagerEqualsReference) {
  std::mt19937_64 seeder(TestSeed("MoeLayerGraphTest.TopKAtTheLimit"));
  FastRng rng(seeder());
  const MoeShape shape{.hidden = 128, .intermediate = 64, .experts = 64, .top_k = kMaxMoeTopK, .shared_expert = true};
  HostMoeWeights weights(shape);
  weights.Randomize(rng, 0, shape.groups());
  std::unique_ptr<MoeLayer> layer = CreateLayer(MoeLayerConfig{.shape = shape, .max_tokens = 4, .poison_stages = true});
  ASSERT_NE(layer, nullptr);
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) ASSERT_TRUE(weights.Upload(*layer, gemm, 0, shape.groups()).ok());
  for (TransformRequest transform : {TransformRequest::kOrdinary, TransformRequest::kAuto}) {
    ASSERT_TRUE(layer->Capture({.transform = transform, .w2_tactic = Tactic{8, 128, 64, 2, 1}}).ok());
    for (int tokens : {1, 4}) {
      for (RoutingKind kind : {RoutingKind::kDistinct, RoutingKind::kRepeated, RoutingKind::kAllOnOne}) {
        const MoeInputs inputs = MakeInputs(rng, shape, tokens, kind, 0.0);
        SCOPED_TRACE(fmt::format("{} tokens {} routing {}", TransformRequestName(transform), tokens, int(kind)));
        EXPECT_EQ(ReplayAndCompare(*layer, weights, inputs, /*graph=*/true), "");
        EXPECT_EQ(ReplayAndCompare(*layer, weights, inputs, /*graph=*/false), "");
      }
    }
  }
}

TEST_F(MoeLayerGraphTest, FailClosedFoldedOnARefusedLayerIsAnErrorAndNothingRuns) {
  std::mt19937_64 seeder(TestSeed("MoeLayerGraphTest.FailClosed"));
  FastRng rng(seeder());
  const MoeShape shape{.hidden = 128, .intermediate = 32, .experts = 8, .top_k = 2, .shared_expert = true};
  HostMoeWeights weights(shape);
  weights.Randomize(rng, 0, shape.groups());
  std::unique_ptr<MoeLayer> layer = CreateLayer(MoeLayerConfig{.shape = shape, .max_tokens = 2});
  ASSERT_NE(layer, nullptr);
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) ASSERT_TRUE(weights.Upload(*layer, gemm, 0, shape.groups()).ok());
  const MoeLayerRequest request{.transform = TransformRequest::kFolded, .policy = FallbackPolicy::kFailClosed};
  ASSERT_TRUE(layer->Capture(request).ok());
  const MoeInputs inputs = MakeInputs(rng, shape, 2, RoutingKind::kDistinct, 0.0);
  EXPECT_EQ(ReplayAndCompare(*layer, weights, inputs, true), "");
  // W2 of expert 3 gets one raw 112: W2 is refused, W13 stays admitted.
  weights.scales(MoeGemm::kW2, 3)[7] = 112;
  ASSERT_TRUE(weights.Upload(*layer, MoeGemm::kW2, 3, 1).ok());
  EXPECT_FALSE(layer->admission(MoeGemm::kW2).admitted);
  EXPECT_TRUE(layer->admission(MoeGemm::kW13).admitted);
  EXPECT_EQ(layer->admission(MoeGemm::kW2).refused.front().index, 3 * weights.scales_per_expert(MoeGemm::kW2) + 7);
  absl::StatusOr<MoeReplay> replay = layer->Replay();
  ASSERT_FALSE(replay.ok());
  EXPECT_EQ(replay.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(replay.status().message().find("W2: folded requested fail-closed"), std::string::npos) << replay.status();
  absl::StatusOr<MoeLayerRoutes> again = layer->Capture(request);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  // With fallback, W2 runs ordinary (layer-refused) and W13 stays folded: admission is per kernel layer.
  absl::StatusOr<MoeLayerRoutes> fallback =
      layer->Capture({.transform = TransformRequest::kFolded, .policy = FallbackPolicy::kFallback});
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->w13.variant, Transform::kFolded);
  EXPECT_EQ(fallback->w2.variant, Transform::kOrdinary);
  EXPECT_EQ(fallback->w2.reason, RouteReason::kLayerRefused);
  EXPECT_EQ(ReplayAndCompare(*layer, weights, inputs, true), "");
}

TEST_F(MoeLayerGraphTest, RoutingsBeyondTheCaptureAreRefusedNotTruncated) {
  std::mt19937_64 seeder(TestSeed("MoeLayerGraphTest.Refused"));
  FastRng rng(seeder());
  const MoeShape shape{.hidden = 128, .intermediate = 32, .experts = 32, .top_k = 6, .shared_expert = true};
  HostMoeWeights weights(shape);
  weights.Randomize(rng, 0, shape.groups());
  // Two tokens could need 12 + 1 W13 tiles of 8 rows; this graph has 7 (one token's worth).
  std::unique_ptr<MoeLayer> layer =
      CreateLayer(MoeLayerConfig{.shape = shape, .max_tokens = 2, .w13_tile_capacity = 7});
  ASSERT_NE(layer, nullptr);
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) ASSERT_TRUE(weights.Upload(*layer, gemm, 0, shape.groups()).ok());
  const Tactic tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 2};
  ASSERT_TRUE(layer->Capture({.w13_tactic = tactic, .w2_tactic = tactic}).ok());
  EXPECT_EQ(layer->tile_capacity(MoeGemm::kW13), 7);
  EXPECT_EQ(layer->tile_capacity(MoeGemm::kW2), MoeWorstMTiles(shape, 2, 8));
  const MoeInputs one = MakeInputs(rng, shape, 1, RoutingKind::kDistinct, 0.0);
  EXPECT_EQ(ReplayAndCompare(*layer, weights, one, true), "");
  MoeDeviceStages before;
  ASSERT_TRUE(layer->ReadStages(before).ok());

  MoeInputs two = MakeInputs(rng, shape, 2, RoutingKind::kDistinct, 0.0);
  std::iota(two.expert_ids.begin(), two.expert_ids.end(), 0);  // 12 distinct experts: 13 tiles
  ASSERT_TRUE(layer->SetInputs(two.tokens, two.activations, two.expert_ids, two.weights).ok());
  absl::StatusOr<MoeReplay> replay = layer->Replay();
  ASSERT_FALSE(replay.ok());
  EXPECT_EQ(replay.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(replay.status().message(),
            "the routing needs 13 W13 M tiles (8x128x64/s2/w0) and 13 W2 M tiles (8x128x64/s2/w0) for its 14 rows; "
            "the graph was captured for 7 and 13: refused, no stage ran");
  MoeDeviceStages after;
  ASSERT_TRUE(layer->ReadStages(after).ok());
  EXPECT_EQ(after.rows, 0);
  EXPECT_EQ(after.output, before.output) << "a refused replay wrote the output";
  EXPECT_EQ(after.w13, before.w13) << "a refused replay ran W13";

  // The same two tokens on 6 shared experts need 6 + 1 tiles: within the capture.
  for (int s = 0; s < 6; ++s) two.expert_ids[6 + s] = two.expert_ids[s];
  EXPECT_EQ(ReplayAndCompare(*layer, weights, two, true), "");

  // An expert id out of range, with the reference's words.
  two.expert_ids[9] = 32;
  ASSERT_TRUE(layer->SetInputs(two.tokens, two.activations, two.expert_ids, two.weights).ok());
  replay = layer->Replay();
  EXPECT_EQ(replay.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(replay.status().message(),
            ScheduleMoeRouting(shape, MoeRouting{2, two.expert_ids, two.weights}).status().message());
  two.expert_ids[9] = -5;
  ASSERT_TRUE(layer->SetInputs(two.tokens, two.activations, two.expert_ids, two.weights).ok());
  EXPECT_EQ(layer->Replay().status().message(), "token 1 slot 3: expert id -5 is outside 0..31");
  // Too many tokens never reaches the device.
  const MoeInputs three = MakeInputs(rng, shape, 3, RoutingKind::kDistinct, 0.0);
  EXPECT_EQ(layer->SetInputs(3, three.activations, three.expert_ids, three.weights).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(layer->CheckDevice().ok());
}

}  // namespace
}  // namespace mxdiff::testing
