#include "fuzz/mutators/layer_mutator.h"

#include <algorithm>
#include <cstring>

#include "fuzz/mutators/mutation_sequence.h"
#include "fuzz/formats/tensor_recipe.h"
#include "kernels/builtin_kernels.h"
#include "kernels/tile_raster.h"
#include "reference/scale_class.h"
#include "reference/fp16.h"
#include "reference/swiglu.h"

namespace mxdiff::fuzz {
namespace {

int Uniform(CaseRng& rng, int low, int high) { return low + int(rng() % uint64_t(high - low + 1)); }
bool OneIn(CaseRng& rng, int n) { return rng() % uint64_t(n) == 0; }

// An fp16 special (reference/fp16.h's one table), or the layer's own edge: +-kSwigluLimit, where
// SwiGLU's clamp starts.
uint16_t SpecialF16(CaseRng& rng) {
  if (OneIn(rng, 10)) return uint16_t(f32_to_f16_rne(kSwigluLimit) | (OneIn(rng, 2) ? 0x8000 : 0));
  return Pick(rng, kF16SpecialValues);
}

uint16_t Activation(CaseRng& rng) {
  if (OneIn(rng, 64)) return SpecialF16(rng);
  return uint16_t(((rng() & 1) << 15) | (Uniform(rng, 11, 18) << 10) | (rng() & 0x3FF));
}

float RoutingWeight(CaseRng& rng) {
  static constexpr uint32_t kExtreme[] = {0x00000000, 0x80000000, 0x00000001, 0x00800000, 0x7F7FFFFF, 0x7149F2CA,
                                          0xF149F2CA, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000};
  if (OneIn(rng, 12)) return bits_to_f32(Pick(rng, kExtreme));
  return float(Uniform(rng, 1, 1000)) / 4000.0f;
}

// Scale bytes of one of four kinds: the checkpoint's 114..126, the admitted 113..128, the
// admission edges, anything.
void FillScales(CaseRng& rng, std::vector<uint8_t>& scales) {
  static const RawRange admitted = ScaleClassRange(ScaleClass::kAdmitted);
  auto checkpoint = [&] { return uint8_t(Uniform(rng, kCheckpointScaleFirst, kCheckpointScaleLast)); };
  const int kind = Uniform(rng, 0, 5);
  for (uint8_t& raw : scales) {
    switch (kind) {
      case 0: case 1: raw = checkpoint(); break;
      case 2: raw = uint8_t(Uniform(rng, admitted.first, admitted.last)); break;
      case 3: raw = OneIn(rng, 8) ? Pick(rng, kInterestingScaleBytes) : checkpoint(); break;
      default: raw = OneIn(rng, 2) ? uint8_t(rng()) : uint8_t(Uniform(rng, 110, 130)); break;
    }
  }
  if (kind <= 1 && OneIn(rng, 4)) scales[rng() % scales.size()] = Pick(rng, kInterestingScaleBytes);  // an edge, maybe
}

void FillCodes(CaseRng& rng, std::vector<uint8_t>& codes) {
  for (uint8_t& code : codes) code = uint8_t(rng());
}

void RandomRouting(CaseRng& rng, const LayerCase& c, LayerReplay& x) {
  const int k = c.shape.top_k, experts = c.shape.experts;
  const int kind = Uniform(rng, 0, 6);
  for (int t = 0; t < x.tokens; ++t) {
    for (int s = 0; s < k; ++s) {
      int32_t& id = x.expert_ids[size_t(t) * k + s];
      switch (kind) {
        case 0:  // all tokens on the same experts
          id = t == 0 ? int32_t(rng() % experts) : x.expert_ids[s];
          break;
        case 1:  // everything on one expert
          id = t == 0 && s == 0 ? int32_t(rng() % experts) : x.expert_ids[0];
          break;
        case 2:  // an id out of range somewhere
          id = OneIn(rng, 2 * k) ? int32_t(Uniform(rng, experts, 255)) : int32_t(rng() % experts);
          break;
        default:  // distinct where possible, repeats allowed
          id = int32_t(rng() % experts);
          break;
      }
    }
  }
  for (float& w : x.weights) w = RoutingWeight(rng);
  for (uint16_t& a : x.activations) a = Activation(rng);
}

// Mostly a builtin CTA shape (few splits, a swizzle the kernels take, past their limit in one of
// ten); in one of six the GEMM mutator's tactic of the format's whole range (MapLayerTactic maps it).
Tactic RandomLayerTactic(CaseRng& rng) {
  if (OneIn(rng, 6)) return RandomTactic(rng);
  const CtaShape& shape = Pick(rng, kCtaShapes);
  static constexpr int kSplits[] = {1, 1, 2, 3, 4, 7, 16, 64, 256};
  return Tactic{.cta_m = shape.m,
                .cta_n = shape.n,
                .cta_k = shape.k,
                .splits = Pick(rng, kSplits),
                .swizzle = OneIn(rng, 10) ? Uniform(rng, kMaxSwizzleLog2 + 1, kMaxSwizzle) : Uniform(rng, 0, kMaxSwizzleLog2)};
}

void RandomReplay(CaseRng& rng, const LayerCase& c, LayerReplay& x) {
  x.tokens = OneIn(rng, 10) ? 0 : (OneIn(rng, 2) ? 1 : Uniform(rng, 1, c.max_tokens));
  x.new_w13_scales = OneIn(rng, 4);
  x.new_w2_scales = OneIn(rng, 4);
  ResizeLayerReplay(c, x);
  if (x.new_w13_scales) FillScales(rng, x.w13_scales);
  if (x.new_w2_scales) FillScales(rng, x.w2_scales);
  RandomRouting(rng, c, x);
}

void RandomShape(CaseRng& rng, LayerCase& c, const LayerProfile& p) {
  c.shape.hidden = 32 * Uniform(rng, 1, p.max_hidden / 32);
  c.shape.intermediate = 32 * Uniform(rng, 1, p.max_intermediate / 32);
  c.shape.experts = Uniform(rng, 1, p.max_experts);
  c.shape.top_k = Uniform(rng, 1, OneIn(rng, 8) ? kLayerMaxTopK : p.max_top_k);
  c.shape.shared_expert = !OneIn(rng, 4);
  c.max_tokens = Uniform(rng, 1, p.max_tokens);
  ResizeLayerCase(c);
  FillCodes(rng, c.w13_codes);
  FillCodes(rng, c.w2_codes);
  FillScales(rng, c.w13_scales);
  FillScales(rng, c.w2_scales);
  for (LayerReplay& x : c.replays) RandomReplay(rng, c, x);
}

int RandomCapacity(CaseRng& rng, const LayerCase& c, int cta_m) {
  if (!OneIn(rng, 3)) return 0;
  const int worst = std::min(MoeWorstMTiles(c.shape, c.max_tokens, std::max(cta_m, 1)), kLayerMaxCapacity);
  return std::clamp(Uniform(rng, worst - 3, worst), 1, kLayerMaxCapacity);
}

}  // namespace

LayerCase RandomLayerCase(CaseRng& rng, const LayerProfile& p) {
  LayerCase c;
  c.replays.resize(size_t(Uniform(rng, 1, p.max_replays)));
  RandomShape(rng, c, p);
  c.request = TransformRequest(Uniform(rng, 0, 2));
  c.policy = FallbackPolicy(Uniform(rng, 0, 1));
  c.w13_tactic = RandomLayerTactic(rng);
  c.w2_tactic = RandomLayerTactic(rng);
  c.w13_capacity = RandomCapacity(rng, c, c.w13_tactic.cta_m);
  c.w2_capacity = RandomCapacity(rng, c, c.w2_tactic.cta_m);
  return c;
}

namespace {

void NewShape(LayerCase& c, CaseRng& rng, const LayerProfile& p) { RandomShape(rng, c, p); }
void RequestPolicy(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  c.request = TransformRequest(Uniform(rng, 0, 2));
  c.policy = FallbackPolicy(Uniform(rng, 0, 1));
}
void NewTactic(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  (OneIn(rng, 2) ? c.w13_tactic : c.w2_tactic) = RandomLayerTactic(rng);
}
void Capacity(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  c.w13_capacity = RandomCapacity(rng, c, c.w13_tactic.cta_m);
  c.w2_capacity = RandomCapacity(rng, c, c.w2_tactic.cta_m);
}
void WeightScales(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  FillScales(rng, OneIn(rng, 2) ? c.w13_scales : c.w2_scales);
}
void WeightCodes(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  FillCodes(rng, OneIn(rng, 2) ? c.w13_codes : c.w2_codes);
}
// A new replay, or one fewer.
void ReplayCount(LayerCase& c, CaseRng& rng, const LayerProfile& p) {
  if (int(c.replays.size()) < p.max_replays && !OneIn(rng, 3)) {
    LayerReplay x;
    RandomReplay(rng, c, x);
    c.replays.insert(c.replays.begin() + rng() % (c.replays.size() + 1), std::move(x));
  } else if (c.replays.size() > 1) {
    c.replays.erase(c.replays.begin() + rng() % c.replays.size());
  }
}
// The same inputs twice in a row, or a replay's scales toggled.
void RepeatOrToggleScales(LayerCase& c, CaseRng& rng, const LayerProfile& p) {
  LayerReplay& x = c.replays[rng() % c.replays.size()];
  if (int(c.replays.size()) < p.max_replays && OneIn(rng, 2)) {
    c.replays.push_back(c.replays.back());
  } else {
    x.new_w13_scales = !x.new_w13_scales;
    ResizeLayerReplay(c, x);
    if (x.new_w13_scales) FillScales(rng, x.w13_scales);
  }
}
// One routing entry or weight.
void RoutingEntry(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  LayerReplay& x = c.replays[rng() % c.replays.size()];
  if (x.expert_ids.empty()) return;
  const size_t i = rng() % x.expert_ids.size();
  if (OneIn(rng, 2)) {
    x.expert_ids[i] = OneIn(rng, 4) ? int32_t(Uniform(rng, 0, 255)) : int32_t(rng() % c.shape.experts);
  } else {
    x.weights[i] = RoutingWeight(rng);
  }
}
// fp16 specials into the activations.
void ActivationSpecials(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  LayerReplay& x = c.replays[rng() % c.replays.size()];
  for (int n = Uniform(rng, 1, 3); n > 0 && !x.activations.empty(); --n) {
    x.activations[rng() % x.activations.size()] = SpecialF16(rng);
  }
}
void NewReplay(LayerCase& c, CaseRng& rng, const LayerProfile&) {
  RandomReplay(rng, c, c.replays[rng() % c.replays.size()]);
}

// The mutations, one slot each (a name in two slots is drawn twice as often).
constexpr NamedMutation<LayerCase, CaseRng, LayerProfile> kLayerMutations[] = {
    {"shape", NewShape},
    {"request-policy", RequestPolicy},
    {"tactic", NewTactic},
    {"capacity", Capacity},
    {"weight-scales", WeightScales},
    {"weight-codes", WeightCodes},
    {"replay-count", ReplayCount},
    {"repeat-or-toggle-scales", RepeatOrToggleScales},
    {"routing-entry", RoutingEntry},
    {"activation-specials", ActivationSpecials},
    {"replay", NewReplay},
    {"replay", NewReplay},
};

}  // namespace

std::vector<std::string_view> LayerMutationNames() {
  return MutationNamesOf(kLayerMutations);
}

void MutateLayerCase(LayerCase& c, CaseRng& rng, const LayerProfile& p) {
  const int mutations = Uniform(rng, 1, 3);
  for (int m = 0; m < mutations; ++m) ApplyMutation(Pick(rng, kLayerMutations), c, rng, p);
  ResizeLayerCase(c);
}

size_t MutateEncodedLayerCase(uint8_t* data, size_t size, size_t max_size, unsigned seed, const LayerProfile& p) {
  CaseRng rng(seed);
  absl::StatusOr<LayerCase> decoded = DecodeLayerCase(std::span<const uint8_t>(data, size));
  LayerCase c = decoded.ok() ? *std::move(decoded) : RandomLayerCase(rng, p);
  StartMutationSequence(std::span<const uint8_t>(data, size));
  for (int attempt = 0; attempt < 8; ++attempt) {
    RestartMutationSequence();
    if (!decoded.ok() || attempt > 3) RecordMutation("random-case");
    LayerCase mutated = c;
    MutateLayerCase(mutated, rng, p);
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeLayerCase(mutated);
    if (bytes.ok() && bytes->size() <= max_size) {
      std::memcpy(data, bytes->data(), bytes->size());
      FinishMutationSequence(*bytes);
      return bytes->size();
    }
    if (attempt >= 3) c = RandomLayerCase(rng, LayerProfile{64, 32, 2, 2, 1, 1});  // the smallest kind
  }
  return 0;
}

}  // namespace mxdiff::fuzz
