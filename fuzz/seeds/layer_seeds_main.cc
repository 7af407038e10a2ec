// Writes fuzz_layer's seed corpus (corpus/fuzz_layer/): hand-made layer cases, one per behaviour
// worth starting from. mxdiff_layer_seeds DIR; exit 0, or 2 when DIR cannot be written.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fmt/core.h"
#include "fuzz/formats/layer_case_format.h"
#include "fuzz/formats/tensor_recipe.h"
#include "fuzz/mutators/layer_mutator.h"
#include "kernels/builtin_kernels.h"
#include "reference/exit_status.h"
#include "reference/hash.h"

namespace mxdiff::fuzz {
namespace {

SplitMix64 rng(20261203);
uint64_t Next() { return rng(); }

// One of the checkpoint's scale bytes (reference/checkpoint_scales.h), uniform.
uint8_t CheckpointScaleByte() { return CheckpointScaleOf(Next()); }

// A decode layer: hidden 64, intermediate 32, 8 experts, top-6 (+ shared), checkpoint scale bytes.
LayerCase Base(int tokens, int replays) {
  LayerCase c;
  c.shape = MoeShape{.hidden = 64, .intermediate = 32, .experts = 8, .top_k = 6, .shared_expert = true};
  c.max_tokens = std::max(tokens, 1);
  c.replays.resize(size_t(replays));
  for (LayerReplay& x : c.replays) x.tokens = tokens;
  ResizeLayerCase(c);
  for (uint8_t& b : c.w13_codes) b = uint8_t(Next());
  for (uint8_t& b : c.w2_codes) b = uint8_t(Next());
  for (uint8_t& b : c.w13_scales) b = CheckpointScaleByte();
  for (uint8_t& b : c.w2_scales) b = CheckpointScaleByte();
  for (LayerReplay& x : c.replays) {
    for (int t = 0; t < x.tokens; ++t) {
      for (int s = 0; s < 6; ++s) x.expert_ids[size_t(t) * 6 + s] = (t * 3 + s + int(Next() % 2)) % 8;
    }
    for (float& w : x.weights) w = float(1 + Next() % 100) / 600.0f;
    for (uint16_t& a : x.activations) a = uint16_t(((Next() & 1) << 15) | ((11 + Next() % 8) << 10) | (Next() & 0x3FF));
  }
  return c;
}

// Writes each case as DIR/NAME.case; exits with 2 when one cannot be written.
class SeedWriter {
 public:
  explicit SeedWriter(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void Emit(const std::string& name, const LayerCase& c) {
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeLayerCase(c);
    if (!bytes.ok()) {
      fmt::print(stderr, "{}: {}\n", name, bytes.status().ToString());
      std::exit(kExitBadInput);
    }
    std::ofstream out(dir_ / (name + ".case"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes->data()), std::streamsize(bytes->size()));
    if (!out) {
      fmt::print(stderr, "cannot write {}\n", (dir_ / name).string());
      std::exit(kExitBadInput);
    }
    ++written_;
  }
  int written() const { return written_; }

 private:
  std::filesystem::path dir_;
  int written_ = 0;
};

// The seeds below draw from one generator: they are written in this order, every time.

// One decode token per transform request.
void EmitDecodeSeeds(SeedWriter& writer) {
  for (TransformRequest request : {TransformRequest::kOrdinary, TransformRequest::kAuto, TransformRequest::kFolded}) {
    LayerCase c = Base(1, 2);
    c.request = request;
    c.policy = request == TransformRequest::kFolded ? FallbackPolicy::kFailClosed : FallbackPolicy::kFallback;
    writer.Emit(fmt::format("decode-1-token-{}", TransformRequestName(request)), c);
  }
}

// Routings: crowded, repeated, invalid, and over the capture's capacity.
void EmitRoutingSeeds(SeedWriter& writer) {
  {  // all tokens on the same experts; then every slot on one expert
    LayerCase c = Base(4, 2);
    for (int t = 1; t < 4; ++t) std::copy(c.replays[0].expert_ids.begin(), c.replays[0].expert_ids.begin() + 6,
                                          c.replays[0].expert_ids.begin() + t * 6);
    std::fill(c.replays[1].expert_ids.begin(), c.replays[1].expert_ids.end(), 5);
    writer.Emit("all-tokens-on-one-expert", c);
  }
  {  // a token naming an expert twice, no shared expert
    LayerCase c = Base(2, 1);
    c.shape.shared_expert = false;
    ResizeLayerCase(c);
    c.replays[0].expert_ids[1] = c.replays[0].expert_ids[0];
    writer.Emit("repeated-expert-no-shared", c);
  }
  {  // an expert id out of range, then a valid routing
    LayerCase c = Base(1, 2);
    c.replays[0].expert_ids[3] = 200;
    writer.Emit("invalid-expert-id", c);
  }
  {  // a capture too small for the second routing: refused, then one that fits
    LayerCase c = Base(2, 3);
    c.w13_capacity = 7;
    for (int s = 0; s < 6; ++s) c.replays[0].expert_ids[6 + s] = c.replays[0].expert_ids[s];
    for (int i = 0; i < 12; ++i) c.replays[1].expert_ids[i] = i % 8;
    c.replays[2] = c.replays[0];
    writer.Emit("over-capacity", c);
  }
}

// W2 refused on the second replay, admitted again on the third (auto: folded, ordinary,
// folded), and the same under fail-closed.
void EmitAdmissionSeeds(SeedWriter& writer) {
  LayerCase c = Base(1, 3);
  c.replays[1].new_w2_scales = true;
  c.replays[2].new_w2_scales = true;
  ResizeLayerCase(c);
  c.replays[1].w2_scales = c.w2_scales;
  c.replays[1].w2_scales[17] = 112;
  c.replays[2].w2_scales = c.w2_scales;
  writer.Emit("w2-refused-then-admitted", c);
  c.request = TransformRequest::kFolded;
  c.policy = FallbackPolicy::kFailClosed;
  writer.Emit("w2-refused-fail-closed", c);
}

// Extreme routing weights with fp16 specials, and no tokens at all.
void EmitValueSeeds(SeedWriter& writer) {
  {
    LayerCase c = Base(2, 1);
    const float extreme[] = {0.0f, -0.0f, 1e-45f, 1e30f, -1e30f, 65504.0f};
    for (size_t i = 0; i < c.replays[0].weights.size(); ++i) c.replays[0].weights[i] = extreme[i % std::size(extreme)];
    c.replays[0].activations[5] = 0x7C00;
    c.replays[0].activations[70] = 0x0001;
    writer.Emit("extreme-weights-and-specials", c);
  }
  {
    LayerCase c = Base(0, 1);
    c.max_tokens = 2;
    writer.Emit("no-tokens", c);
  }
}

// Every CTA shape of the builtin kernels (kCtaShapes) with split-K and a swizzle; W2's tactic
// apart from W13's.
void EmitTacticSeeds(SeedWriter& writer) {
  constexpr struct {
    int splits, swizzle;
  } kSplitsSwizzle[] = {{3, 1}, {2, 0}, {1, 2}, {4, 0}};
  for (size_t i = 0; i < std::size(kCtaShapes); ++i) {
    const CtaShape& shape = kCtaShapes[i];
    const auto& [splits, swizzle] = kSplitsSwizzle[i % std::size(kSplitsSwizzle)];
    const Tactic t{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k, .splits = splits, .swizzle = swizzle};
    LayerCase c = Base(3, 1);
    c.w13_tactic = t;
    c.w2_tactic = t;
    writer.Emit(fmt::format("tactic-{}x{}x{}-s{}", t.cta_m, t.cta_n, t.cta_k, t.splits), c);
  }
  // An expert of 16 rows (named twice by 8 tokens): two W2 tiles.
  LayerCase c = Base(8, 1);
  for (int t = 0; t < 8; ++t) c.replays[0].expert_ids[size_t(t) * 6] = c.replays[0].expert_ids[size_t(t) * 6 + 1] = 0;
  c.w13_tactic = Tactic{64, 128, 32, 1, 0};
  c.w2_tactic = Tactic{8, 128, 64, 2, 1};
  writer.Emit("w2-tactic-apart-two-w2-tiles", c);
}

// top_k at the layer's limit: every token fills 32 slots over 8 experts.
void EmitTopKSeed(SeedWriter& writer) {
  LayerCase c = Base(3, 1);
  c.shape.top_k = kLayerMaxTopK;
  ResizeLayerCase(c);
  LayerReplay& x = c.replays[0];
  for (size_t i = 0; i < x.expert_ids.size(); ++i) x.expert_ids[i] = int32_t((i * 3 + Next() % 2) % 8);
  for (float& w : x.weights) w = float(1 + Next() % 100) / 3200.0f;
  writer.Emit(fmt::format("top-k-{}", kLayerMaxTopK), c);
}

}  // namespace
}  // namespace mxdiff::fuzz

int main(int argc, char** argv) {
  using namespace mxdiff::fuzz;
  if (argc != 2) {
    fmt::print(stderr, "usage: mxdiff_layer_seeds DIR\n");
    return mxdiff::kExitBadInput;
  }
  const std::filesystem::path dir = argv[1];
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  SeedWriter writer(dir);
  EmitDecodeSeeds(writer);
  EmitRoutingSeeds(writer);
  EmitAdmissionSeeds(writer);
  EmitValueSeeds(writer);
  EmitTacticSeeds(writer);
  EmitTopKSeed(writer);
  fmt::print("wrote {} layer cases into {}\n", writer.written(), dir.string());
  return mxdiff::kExitOk;
}
