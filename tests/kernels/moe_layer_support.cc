#include "tests/kernels/moe_layer_support.h"

#include <cstring>
#include <iterator>

#include "fmt/core.h"
#include "fuzz/checks/layer_compare.h"
#include "kernels/moe_layer_plan.h"
#include "kernels/tile_map.h"
#include "kernels/tile_raster.h"
#include "reference/checkpoint_scales.h"
#include "reference/fp16.h"

namespace mxdiff::testing {

void FastRng::Fill(std::span<uint8_t> bytes) {
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    const uint64_t word = (*this)();
    std::memcpy(bytes.data() + i, &word, 8);
  }
  for (; i < bytes.size(); ++i) bytes[i] = uint8_t((*this)());
}

uint8_t CheckpointScale(FastRng& rng) { return CheckpointScaleOf(rng()); }

HostMoeWeights::HostMoeWeights(const MoeShape& s) : shape(s) {
  const size_t groups = size_t(s.groups());
  w13_codes.resize(groups * codes_per_expert(MoeGemm::kW13));
  w13_scales.resize(groups * scales_per_expert(MoeGemm::kW13), 127);
  w2_codes.resize(groups * codes_per_expert(MoeGemm::kW2));
  w2_scales.resize(groups * scales_per_expert(MoeGemm::kW2), 127);
}

size_t HostMoeWeights::codes_per_expert(MoeGemm gemm) const {
  return size_t(shape.hidden) * size_t(shape.intermediate) * (gemm == MoeGemm::kW13 ? 2 : 1) / 2;
}
size_t HostMoeWeights::scales_per_expert(MoeGemm gemm) const { return codes_per_expert(gemm) * 2 / kBlockK; }

std::span<uint8_t> HostMoeWeights::codes(MoeGemm gemm, int expert) {
  std::vector<uint8_t>& all = gemm == MoeGemm::kW13 ? w13_codes : w2_codes;
  return std::span(all).subspan(size_t(expert) * codes_per_expert(gemm), codes_per_expert(gemm));
}
std::span<uint8_t> HostMoeWeights::scales(MoeGemm gemm, int expert) {
  std::vector<uint8_t>& all = gemm == MoeGemm::kW13 ? w13_scales : w2_scales;
  return std::span(all).subspan(size_t(expert) * scales_per_expert(gemm), scales_per_expert(gemm));
}

void HostMoeWeights::Randomize(FastRng& rng, int first, int count) {
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    for (int e = first; e < first + count; ++e) {
      rng.Fill(codes(gemm, e));
      for (uint8_t& raw : scales(gemm, e)) raw = CheckpointScale(rng);
    }
  }
}

absl::Status HostMoeWeights::Upload(MoeLayer& layer, MoeGemm gemm, int first, int count) {
  const std::vector<uint8_t>& all_codes = gemm == MoeGemm::kW13 ? w13_codes : w2_codes;
  const std::vector<uint8_t>& all_scales = gemm == MoeGemm::kW13 ? w13_scales : w2_scales;
  return layer.WriteWeights(
      gemm, first,
      std::span(all_codes).subspan(size_t(first) * codes_per_expert(gemm), size_t(count) * codes_per_expert(gemm)),
      std::span(all_scales).subspan(size_t(first) * scales_per_expert(gemm), size_t(count) * scales_per_expert(gemm)));
}

namespace {

uint16_t ModerateHalf(FastRng& rng) {
  return uint16_t(((rng() & 1) << 15) | ((11 + rng() % 8) << 10) | (rng() & 0x3FF));  // 2^-4 .. 2^4
}

uint16_t SpecialHalf(FastRng& rng) {
  return kF16SpecialValues[rng() % std::size(kF16SpecialValues)];
}

float ExtremeWeight(FastRng& rng) {
  static constexpr uint32_t kBits[] = {0x00000000, 0x80000000, 0x00000001, 0x00800000, 0x3F800000, 0x477FE000,
                                       0x7149F2CA, 0xF149F2CA, 0x7F800000, 0x7FC00000, 0x7F7FFFFF};
  return bits_to_f32(kBits[rng() % (sizeof(kBits) / sizeof(kBits[0]))]);
}

void DistinctExperts(FastRng& rng, int experts, int k, int32_t* out) {
  for (int s = 0; s < k; ++s) {
    for (;;) {
      const int32_t id = int32_t(rng() % uint64_t(experts));
      bool seen = false;
      for (int j = 0; j < s; ++j) seen |= out[j] == id;
      if (!seen || k > experts) {
        out[s] = id;
        break;
      }
    }
  }
}

}  // namespace

MoeInputs MakeInputs(FastRng& rng, const MoeShape& shape, int tokens, RoutingKind kind, double special_rate) {
  MoeInputs in;
  in.tokens = tokens;
  const int k = shape.top_k;
  in.expert_ids.resize(size_t(tokens) * k);
  in.weights.resize(size_t(tokens) * k);
  for (int t = 0; t < tokens; ++t) {
    int32_t* ids = in.expert_ids.data() + size_t(t) * k;
    if (kind == RoutingKind::kAllOnOne && t > 0) {
      std::copy(in.expert_ids.begin(), in.expert_ids.begin() + k, ids);
    } else {
      DistinctExperts(rng, shape.experts, k, ids);
    }
    if (kind == RoutingKind::kRepeated && k > 1 && (t == 0 || rng() % 2 == 0)) ids[1 + rng() % (k - 1)] = ids[0];
    // Softmax-like weights that sum to about 1; the extreme kind replaces some of them.
    for (int s = 0; s < k; ++s) {
      float& w = in.weights[size_t(t) * k + s];
      w = float(1 + rng() % 1000) / (1000.0f * float(k));
      if (kind == RoutingKind::kExtremeWeights && rng() % 2 == 0) w = ExtremeWeight(rng);
    }
  }
  in.activations.resize(size_t(tokens) * shape.hidden);
  const uint64_t special_threshold = uint64_t(special_rate * 18446744073709551615.0);
  for (uint16_t& a : in.activations) a = special_rate > 0 && rng() < special_threshold ? SpecialHalf(rng) : ModerateHalf(rng);
  return in;
}

MoeLayerProblem Problem(const HostMoeWeights& w, const MoeInputs& in) {
  return MoeLayerProblem{.shape = w.shape,
                         .routing = {in.tokens, in.expert_ids, in.weights},
                         .activations = in.activations,
                         .w13 = {w.w13_codes, w.w13_scales},
                         .w2 = {w.w2_codes, w.w2_scales}};
}

std::string CompareStages(const MoeShape& shape, const MoeLayerStages& e, const MoeDeviceStages& d, int tokens,
                          bool poisoned, int w13_cta_m, int w2_cta_m) {
  const fuzz::StageDifference difference = fuzz::CompareMoeStages(shape, e, d, tokens, poisoned, w13_cta_m, w2_cta_m);
  return difference.empty() ? "" : difference.stage + ": " + difference.description;
}

MoeLayerOptions ReferenceOptionsFor(const MoeLayerRoutes& routes, float limit) {
  return fuzz::MoeReferenceOptions(routes, limit);
}

}  // namespace mxdiff::testing
