// The exactness step's judgements that need no device (tools/gate/gate_exactness.h): which
// transform each GEMM of each arm must run, and the finding a differing replay leaves.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "fuzz/formats/layer_case_format.h"
#include "gtest/gtest.h"
#include "reference/checkpoint_scales.h"
#include "tools/gate/gate_exactness.h"

namespace mxdiff::gate {
namespace {

// Only admission() is asked of the device layer by CheckRoutes.
class AdmissionOnly : public MoeLayer {
 public:
  AdmissionOnly(LayerAdmission w13, LayerAdmission w2) : w13_(std::move(w13)), w2_(std::move(w2)) {}
  const MoeLayerConfig& config() const override { return config_; }
  int max_rows() const override { return 0; }
  absl::Status WriteWeights(MoeGemm, int, std::span<const uint8_t>, const AdmittedScales&) override {
    return absl::UnimplementedError("");
  }
  const LayerAdmission& admission(MoeGemm gemm) const override { return gemm == MoeGemm::kW13 ? w13_ : w2_; }
  absl::Status SetInputs(int, std::span<const uint16_t>, std::span<const int32_t>, std::span<const float>) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<MoeLayerRoutes> Capture(const MoeLayerRequest&) override { return absl::UnimplementedError(""); }
  absl::StatusOr<MoeReplay> Replay() override { return absl::UnimplementedError(""); }
  absl::StatusOr<MoeReplay> RunEager() override { return absl::UnimplementedError(""); }
  absl::Status ReadStages(MoeDeviceStages&) override { return absl::UnimplementedError(""); }
  absl::Status EnqueueStages(void*, unsigned) override { return absl::UnimplementedError(""); }
  int tile_capacity(MoeGemm) const override { return 0; }
  absl::Status CheckDevice() override { return absl::OkStatus(); }

 private:
  MoeLayerConfig config_;
  LayerAdmission w13_, w2_;
};

const Tactic kTactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 1, .swizzle = 0};

Route Ran(Transform variant, RouteReason reason) {
  Route route;
  route.variant = variant;
  route.tactic = kTactic;
  route.reason = reason;
  return route;
}

// A layer whose W13 slice on this rank holds a raw 112 and whose W2 slice is admitted.
GateLayer RefusedW13() {
  GateLayer layer{.name = "layers.0"};
  layer.w13_rank = AdmitLayer(std::vector<uint8_t>{120, 112, 121});
  layer.w2_rank = AdmitLayer(std::vector<uint8_t>{120, 121});
  return layer;
}

TEST(GateExactnessTest, FoldedArmFallsBackExactlyWhereTheRanksBytesAreRefused) {
  const GateLayer layer = RefusedW13();
  const AdmissionOnly device(layer.w13_rank, layer.w2_rank);
  const Route w13_fallback = Ran(Transform::kOrdinary, RouteReason::kLayerRefused);
  const Route w2_folded = Ran(Transform::kFolded, RouteReason::kFoldedAdmitted);
  EXPECT_EQ(CheckRoutes(layer, device, Transform::kFolded, {w13_fallback, w2_folded}), "");
  EXPECT_EQ(CheckRoutes(layer, device, Transform::kFolded,
                        {w13_fallback, Ran(Transform::kOrdinary, RouteReason::kFoldedMissing)}),
            "");  // no folded kernel for the tactic: not a wrong fallback
  EXPECT_EQ(CheckRoutes(layer, device, Transform::kFolded, {Ran(Transform::kFolded, RouteReason::kFoldedAdmitted), w2_folded}),
            "layers.0 W13 arm folded: ran folded 8x128x64/s1/w0 (folded-admitted) where this rank's bytes demand ordinary; ");
  EXPECT_EQ(CheckRoutes(layer, device, Transform::kFolded,
                        {w13_fallback, Ran(Transform::kOrdinary, RouteReason::kLayerRefused)}),
            "layers.0 W2 arm folded: ran ordinary 8x128x64/s1/w0 (layer-refused) where this rank's bytes demand folded; ");
  const Route ordinary = Ran(Transform::kOrdinary, RouteReason::kOrdinaryRequested);
  EXPECT_EQ(CheckRoutes(layer, device, Transform::kOrdinary, {ordinary, ordinary}), "");
  EXPECT_NE(CheckRoutes(layer, device, Transform::kOrdinary, {ordinary, w2_folded}), "");
}

TEST(GateExactnessTest, TheKernelsAdmissionMustAgreeWithTheRuleOnTheRanksBytes) {
  const GateLayer layer = RefusedW13();
  const AdmissionOnly admits_all(LayerAdmission{}, LayerAdmission{});
  const Route ordinary = Ran(Transform::kOrdinary, RouteReason::kOrdinaryRequested);
  EXPECT_EQ(CheckRoutes(layer, admits_all, Transform::kOrdinary, {ordinary, ordinary}),
            "layers.0 W13: the kernels' admission (true) disagrees with the rule on this rank's bytes (false); ");
}

checkpoint::MoeLayerWeights SmallWeights(std::mt19937_64& random) {
  checkpoint::MoeLayerWeights w;
  w.layer = "layers.0";
  w.experts = 4;
  w.hidden = 64;
  w.intermediate = 32;
  w.full_intermediate = 128;
  w.shared_expert = true;
  const size_t groups = size_t(w.groups());
  auto fill = [&](std::vector<uint8_t>& bytes, size_t size, int low, int high) {
    std::uniform_int_distribution<int> value(low, high);
    bytes.resize(size);
    for (uint8_t& byte : bytes) byte = uint8_t(value(random));
  };
  fill(w.w13_codes, groups * 64 * 32, 0, 255);
  fill(w.w13_scales, groups * 64 * 2, kCheckpointScaleFirst, kCheckpointScaleLast);
  fill(w.w2_codes, groups * 64 * 16, 0, 255);
  fill(w.w2_scales, groups * 64 * 1, kCheckpointScaleFirst, kCheckpointScaleLast);
  return w;
}

TEST(GateExactnessTest, ADifferingReplayIsAFuzzLayerCaseThatDecodesToTheReplay) {
  std::mt19937_64 random(3);
  GateLayer layer{.name = "layers.0", .weights = SmallWeights(random), .top_k = 2};
  const MoeInputs x = DrawMoeInputs(layer.weights->shape(2), 3, random);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "gate_exactness_test";
  std::filesystem::remove_all(dir);
  const Route w13 = Ran(Transform::kFolded, RouteReason::kFoldedAdmitted), w2 = Ran(Transform::kOrdinary, RouteReason::kLayerRefused);
  const std::string said = WriteLayerCase(layer, Transform::kFolded, {w13, w2}, x, "layer/mismatch/W2/gate", "W2 differs", dir);
  ASSERT_EQ(said.rfind("written ", 0), 0u) << said;
  const std::string path = said.substr(8, said.find(' ', 8) - 8);
  std::ifstream file(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const absl::StatusOr<fuzz::LayerCase> c = fuzz::DecodeLayerCase(bytes);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shape, layer.weights->shape(2));
  EXPECT_EQ(c->request, TransformRequest::kFolded);
  EXPECT_EQ(c->w13_codes, layer.weights->w13_codes);
  EXPECT_EQ(c->w2_scales, layer.weights->w2_scales);
  ASSERT_EQ(c->replays.size(), 1u);
  EXPECT_EQ(c->replays[0].activations, x.activations);
  EXPECT_EQ(c->replays[0].expert_ids, x.expert_ids);
  EXPECT_EQ(c->replays[0].weights, x.weights);
  EXPECT_TRUE(std::filesystem::exists(path.substr(0, path.size() - 5) + ".txt")) << path;
  std::filesystem::remove_all(dir);
}

TEST(GateExactnessTest, ALayerBeyondTheCaseFormatSaysWhyThereIsNoCase) {
  checkpoint::MoeLayerWeights v4;
  v4.experts = 256;
  v4.hidden = 4096;
  v4.intermediate = 512;
  GateLayer layer{.name = "layers.0", .weights = v4};
  const Route r = Ran(Transform::kOrdinary, RouteReason::kOrdinaryRequested);
  EXPECT_EQ(WriteLayerCase(layer, Transform::kOrdinary, {r, r}, MoeInputs{}, "s", "d", ::testing::TempDir()),
            "no .case: the layer (hidden 4096, intermediate 512, 256 experts) exceeds fuzz_layer's format (hidden 256, "
            "intermediate 128, 16 experts)");
}

}  // namespace
}  // namespace mxdiff::gate
