// An MoE layer's MXFP4 expert weights read from a checkpoint and sliced for one tensor-parallel
// rank, as the host arrays the MoE layer takes (reference/moe_layer.h's MoeGemmWeights,
// kernels/moe_layer.h's WriteWeights): per group N x K/2 packed codes and N x K/32 raw scale
// bytes, row-major (reference/problem.h), routed experts 0..E-1 then the shared expert.
//
// Names (DeepSeek V4, checkpoint/README.md): `{layer}.ffn.experts.{e}.w1|w2|w3.weight` (U8/I8,
// [rows, K/2]) with `.scale` (F8_E8M0 or U8, [rows, K/32]), and `{layer}.ffn.shared_experts.w1|w2|w3`.
// w1 (gate) and w3 (up) are [intermediate, hidden], w2 is [hidden, intermediate].
//
// Tensor parallelism, as serving engines slice an MoE FFN (Megatron's column/row-parallel pair,
// vLLM's and SGLang's fused MoE): W13 is column-parallel, rank r keeps rows
// [r I/tp, (r+1) I/tp) of w1 and of w3 (the N dimension), so SwiGLU needs no communication;
// W2 is row-parallel, rank r keeps columns [r I/tp, (r+1) I/tp) of w2 (its K dimension) and the
// ranks' outputs are summed (all-reduce). W2's K slice must hold whole 32-element scale blocks:
// I/tp a multiple of 32, refused otherwise.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/byte_source.h"
#include "checkpoint/checkpoint.h"
#include "reference/moe_layer.h"

namespace mxdiff::checkpoint {

struct TensorParallel {
  int tp = 1;
  int rank = 0;
};

struct MoeLayerWeights {
  std::string layer;             // "layers.3"
  TensorParallel parallel;
  int experts = 0;               // routed
  int hidden = 0;                // W13's K, W2's N
  int intermediate = 0;          // per rank: W13's N is twice this, W2's K is this
  int full_intermediate = 0;     // in the checkpoint
  bool shared_expert = false;    // loaded as the last group
  std::string shared_note;       // why a shared expert in the checkpoint was not loaded ("" if none)
  std::vector<uint8_t> w13_codes;   // groups x 2I x hidden/2: per group gate rows then up rows
  std::vector<uint8_t> w13_scales;  // groups x 2I x hidden/32
  std::vector<uint8_t> w2_codes;    // groups x hidden x I/2
  std::vector<uint8_t> w2_scales;   // groups x hidden x I/32

  int groups() const { return experts + (shared_expert ? 1 : 0); }
  MoeShape shape(int top_k) const {
    return MoeShape{.hidden = hidden, .intermediate = intermediate, .experts = experts, .top_k = top_k,
                    .shared_expert = shared_expert};
  }
  MoeGemmWeights w13() const { return {w13_codes, w13_scales}; }
  MoeGemmWeights w2() const { return {w2_codes, w2_scales}; }
};

// The MoE layers of a checkpoint ("layers.0", "mtp.0", ...): prefixes with a routed expert's w1.
std::vector<std::string> MoeLayersOf(const checkpoint::Checkpoint& checkpoint);

// Errors (InvalidArgument, or NotFound for a layer not in the checkpoint) name the file, the
// tensor or the value: tp < 1, a rank outside 0..tp-1, a missing w1/w2/w3 or scale, a dtype
// that is not packed MXFP4, a shape that disagrees between experts or between a weight and its
// scale, tp not dividing the intermediate size, a W2 slice that is not whole 32-element blocks.
// A shared expert that is absent, or not MXFP4 (V4-Flash's is FP8), is not loaded (shared_note).
absl::StatusOr<MoeLayerWeights> LoadMoeLayerWeights(const checkpoint::Checkpoint& checkpoint, const checkpoint::ByteSource& bytes,
                                                    std::string_view layer, TensorParallel parallel);
// LoadMoeLayerWeights's errors that its headers decide, reading no tensor's bytes (the gate checks
// all its input before it runs).
absl::Status CheckMoeLayerWeights(const checkpoint::Checkpoint& checkpoint, std::string_view layer, TensorParallel parallel);
// The checkpoint at `paths` (as `mxdiff audit` reads them: files, folders, an index); any error
// reading its headers is returned.
absl::StatusOr<MoeLayerWeights> LoadMoeLayerWeights(const std::vector<std::string>& paths, std::string_view layer,
                                                    TensorParallel parallel);

}  // namespace mxdiff::checkpoint
