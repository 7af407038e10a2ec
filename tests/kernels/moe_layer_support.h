// Test support for the MoE layer's GPU tests and benchmark (not library code): host copies of a
// layer's weights with fast random filling, routings of the kinds that matter (distinct top-k,
// every token on the same experts, a token naming an expert twice, extreme routing weights), and
// the stage-by-stage comparison of a replay with the reference.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/moe_layer.h"
#include "reference/hash.h"
#include "reference/moe_layer.h"

namespace mxdiff::testing {

// SplitMix64: filling a gigabyte of weights with std::mt19937_64 would dominate a test.
class FastRng : public SplitMix64 {
 public:
  using SplitMix64::SplitMix64;
  void Fill(std::span<uint8_t> bytes);
};

// Raw scale bytes of the DeepSeek V4 checkpoint's distribution: 114..126 (all admitted).
uint8_t CheckpointScale(FastRng& rng);

struct HostMoeWeights {
  MoeShape shape;
  std::vector<uint8_t> w13_codes, w13_scales, w2_codes, w2_scales;

  explicit HostMoeWeights(const MoeShape& shape);
  std::span<uint8_t> codes(MoeGemm gemm, int expert);
  std::span<uint8_t> scales(MoeGemm gemm, int expert);
  size_t codes_per_expert(MoeGemm gemm) const;
  size_t scales_per_expert(MoeGemm gemm) const;
  // Random codes and checkpoint scales for experts [first, first + count) of both GEMMs.
  void Randomize(FastRng& rng, int first, int count);
  // Writes experts [first, first + count) of one GEMM into the device layer.
  absl::Status Upload(MoeLayer& layer, MoeGemm gemm, int first, int count);
};

enum class RoutingKind {
  kDistinct,       // top-k distinct experts per token
  kAllOnOne,       // every token picks the same top-k experts
  kRepeated,       // some token names one expert more than once
  kExtremeWeights,  // distinct experts, weights from zeros, subnormals, huge values, Inf, NaN
};

struct MoeInputs {
  int tokens = 0;
  std::vector<int32_t> expert_ids;
  std::vector<float> weights;
  std::vector<uint16_t> activations;
};

// `special_rate`: share of activations drawn from fp16 specials instead of moderate normals.
MoeInputs MakeInputs(FastRng& rng, const MoeShape& shape, int tokens, RoutingKind kind, double special_rate);

MoeLayerProblem Problem(const HostMoeWeights& weights, const MoeInputs& inputs);

// "" when every stage of `device` (first `rows` rows, first `tokens` tokens) equals `expected`
// bit for bit, the tile maps equal the enumeration of FindGroupTile, and (with `poisoned`)
// nothing beyond the rows was written; else which stage differs first and where.
std::string CompareStages(const MoeShape& shape, const MoeLayerStages& expected, const MoeDeviceStages& device,
                          int tokens, bool poisoned, int w13_cta_m, int w2_cta_m);

// The reference options of the routes that ran (model sm90-emulated, the calibrated H200 model).
MoeLayerOptions ReferenceOptionsFor(const MoeLayerRoutes& routes, float limit);

}  // namespace mxdiff::testing
