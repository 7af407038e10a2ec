// fuzz_layer's case: one MoE layer (shape, capture capacity, request, both GEMMs' tactics and
// weights) and a sequence of replays of its CUDA graph, each with new inputs and optionally new
// scale bytes (fuzz/README.md, "fuzz_layer"). The conventions of fuzz/formats/case_format.h: little-endian,
// strict (a byte string is a case only if every field is in range and the length is exactly what
// the shape implies; the error names the field), encoder and decoder walking one field list.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/moe_layer_plan.h"
#include "reference/moe_layer.h"

namespace mxdiff::fuzz {

inline constexpr char kLayerCaseMagic[4] = {'M', 'X', 'D', 'L'};
inline constexpr uint8_t kLayerCaseVersion = 1;

inline constexpr int kLayerMaxHidden = 256;
inline constexpr int kLayerMaxIntermediate = 128;
inline constexpr int kLayerMaxExperts = 16;
inline constexpr int kLayerMaxTopK = kMaxMoeTopK;  // the layer's whole range
inline constexpr int kLayerMaxTokens = 8;
inline constexpr int kLayerMaxCapacity = 64;  // M tiles; 0 = the worst routing of max_tokens
inline constexpr int kLayerMaxReplays = 8;

struct LayerReplay {
  bool new_w13_scales = false;
  bool new_w2_scales = false;
  std::vector<uint8_t> w13_scales;  // the whole W13 scale array, when new_w13_scales
  std::vector<uint8_t> w2_scales;
  int tokens = 0;
  std::vector<int32_t> expert_ids;  // tokens x top_k, each 0..255 (>= experts: an invalid routing)
  std::vector<float> weights;       // tokens x top_k
  std::vector<uint16_t> activations;  // tokens x hidden

  friend bool operator==(const LayerReplay& a, const LayerReplay& b);
};

struct LayerCase {
  MoeShape shape{.hidden = 32, .intermediate = 32, .experts = 1, .top_k = 1, .shared_expert = true};
  int max_tokens = 1;
  int w13_capacity = 0;
  int w2_capacity = 0;
  TransformRequest request = TransformRequest::kAuto;
  FallbackPolicy policy = FallbackPolicy::kFallback;
  Tactic w13_tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 1, .swizzle = 0};
  Tactic w2_tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 1, .swizzle = 0};
  std::vector<uint8_t> w13_codes, w13_scales, w2_codes, w2_scales;  // the layouts of reference/moe_layer.h
  std::vector<LayerReplay> replays;

  size_t w13_codes_size() const;
  size_t w13_scales_size() const;
  size_t w2_codes_size() const;
  size_t w2_scales_size() const;
  friend bool operator==(const LayerCase&, const LayerCase&) = default;
};

// Sizes every weight array for the shape (new bytes: code 0, raw scale 127) and every replay's
// arrays for its token count. Does not validate.
void ResizeLayerCase(LayerCase& c);
void ResizeLayerReplay(const LayerCase& c, LayerReplay& replay);

absl::Status ValidateLayerCase(const LayerCase& c);
absl::StatusOr<LayerCase> DecodeLayerCase(std::span<const uint8_t> bytes);
absl::StatusOr<std::vector<uint8_t>> EncodeLayerCase(const LayerCase& c);

// The layer's scales as of replay `replay` (the case's, then each replay's replacements in order).
std::span<const uint8_t> LayerScalesAt(const LayerCase& c, MoeGemm gemm, int replay);

// Readable summary for findings and repro: shape, capacity, request, tactics, scale classes, replays.
std::string DescribeLayerCase(const LayerCase& c);

}  // namespace mxdiff::fuzz
