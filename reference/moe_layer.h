// The MoE decode layer as plain data and its bit-exact reference (reference/README.md, "The MoE
// layer"): top-k routing -> rows gathered into expert order -> W13 (gate half then up half) ->
// clamped SwiGLU -> W2 -> routing-weighted sum per token. The two GEMMs are ReferenceGemm; the
// activation is reference/swiglu.h and the sum reference/moe_layer_combine.h, the headers the
// kernels compile. Views only: the caller owns the memory.
//
//   activations  tokens x hidden fp16 bits
//   expert_ids   tokens x top_k int32, each 0..experts-1 (a token may name an expert twice)
//   weights      tokens x top_k fp32 routing weights
//   w13          groups x (2 intermediate) x hidden: rows 0..I-1 of an expert are the gate
//                half, rows I..2I-1 the up half (docs/numerics.md: shapes); codes and raw scale bytes in the
//                layouts of reference/problem.h
//   w2           groups x hidden x intermediate
// groups = experts + 1 with the shared expert (the last group: every token, weight 1).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/problem.h"
#include "reference/step_model.h"
#include "reference/swiglu.h"
#include "reference/transform.h"

namespace mxdiff {

inline constexpr int kMaxMoeExperts = 1022;  // groups + 1 row offsets fit one 1024-thread CTA (routing kernel)
inline constexpr int kMaxMoeTopK = 32;

struct MoeShape {
  int hidden = 0;        // W13's K, W2's N
  int intermediate = 0;  // per expert on this rank: W13's N is twice this, W2's K is this
  int experts = 0;       // routed experts
  int top_k = 0;
  bool shared_expert = true;

  int groups() const { return experts + (shared_expert ? 1 : 0); }
  int w13_n() const { return 2 * intermediate; }
  friend bool operator==(const MoeShape&, const MoeShape&) = default;
};

// hidden and intermediate positive multiples of 32, experts 1..kMaxMoeExperts, top_k 1..kMaxMoeTopK.
absl::Status ValidateMoeShape(const MoeShape& shape);

struct MoeRouting {
  int tokens = 0;
  std::span<const int32_t> expert_ids;  // tokens x top_k
  std::span<const float> weights;       // tokens x top_k
};

struct MoeGemmWeights {
  std::span<const uint8_t> codes;   // groups x N x K/2
  std::span<const uint8_t> scales;  // groups x N x K/32
};

struct MoeLayerProblem {
  MoeShape shape;
  MoeRouting routing;
  std::span<const uint16_t> activations;  // tokens x hidden
  MoeGemmWeights w13;
  MoeGemmWeights w2;
};

// Shape, span sizes; expert ids are checked by ScheduleMoeRouting.
absl::Status ValidateMoeProblem(const MoeLayerProblem& problem);

// Expert order: group g owns rows [row_offsets[g], row_offsets[g + 1]); within a routed group
// the rows follow the routing entries in ascending (token, slot) order; the shared group holds
// one row per token, in token order. The device computes exactly this (kernels/moe_layer_kernels.cu).
struct MoeSchedule {
  std::vector<int32_t> row_offsets;  // groups + 1
  std::vector<int32_t> row_token;    // rows: the token whose activations row r copies
  std::vector<int32_t> entry_row;    // tokens x top_k: the row of (token, slot)

  int rows() const { return row_offsets.empty() ? 0 : row_offsets.back(); }
  // The shared expert's row of `token` (shape.shared_expert only).
  int shared_row(const MoeShape& shape, int token) const { return row_offsets[shape.experts] + token; }
};

// InvalidArgument naming the first expert id outside 0..experts-1 (by token and slot).
absl::StatusOr<MoeSchedule> ScheduleMoeRouting(const MoeShape& shape, const MoeRouting& routing);

struct MoeGemmOptions {
  Transform transform = Transform::kOrdinary;
  Tactic tactic;  // only cta_k and splits change bits
};

struct MoeLayerOptions {
  StepModel model = StepModel::kSm90Emulated;
  MoeGemmOptions w13;
  MoeGemmOptions w2;
  float swiglu_limit = kSwigluLimit;
  int threads = 0;  // ReferenceGemm's
};

// Every stage's bits, each in expert order except the output.
struct MoeLayerStages {
  MoeSchedule schedule;
  std::vector<uint16_t> gathered;   // rows x hidden: activations[row_token[r]]
  std::vector<uint16_t> w13;        // rows x 2 intermediate: gate half then up half
  std::vector<uint16_t> activated;  // rows x intermediate: swiglu_f16(gate, up)
  std::vector<uint16_t> w2;         // rows x hidden
  std::vector<uint16_t> output;     // tokens x hidden: the combine of reference/moe_layer_combine.h
};

absl::StatusOr<MoeLayerStages> ReferenceMoeLayer(const MoeLayerProblem& problem, const MoeLayerOptions& options);

// The grouped GEMM problems of the two stages, views into `problem`, `stages` and `schedule`.
GroupedProblem MoeW13Problem(const MoeLayerProblem& problem, const MoeSchedule& schedule,
                             std::span<const uint16_t> gathered);
GroupedProblem MoeW2Problem(const MoeLayerProblem& problem, const MoeSchedule& schedule,
                            std::span<const uint16_t> activated);

// The combine of one token and hidden column from the W2 rows (rows x hidden).
uint16_t MoeCombineElement(const MoeLayerProblem& problem, const MoeSchedule& schedule,
                           std::span<const uint16_t> w2, int token, int column);

}  // namespace mxdiff
