// Which tensors of a checkpoint are MXFP4 scale tensors, which weight each one scales, and the
// kernel layers they form: the unit the kernels prepare and the audit judges. Header data only.
//
// Selected: every F8_E8M0 tensor, and U8 tensors named by a known convention (`X.scale` beside
// `X.weight`, DeepSeek V4; `X_scales` beside `X_blocks`, gpt-oss); `--pattern` replaces that
// selection by a regular expression over names. Kernel layers:
//   `P.ffn.experts.{e}.w1/w3.scale` of all routed experts e -> `P.ffn.experts.W13` (per expert the
//       w1 rows, then the w3 rows: the gate then the up half of W13's output row),
//   `P.ffn.experts.{e}.w2.scale` -> `P.ffn.experts.W2`,
//   an MXFP4 `P.ffn.shared_experts.w1/w3` and `.w2` -> the last group of those two layers, as the
//       MoE layer runs it (checkpoint/README.md, "The shared expert"); without routed experts
//       selected, `P.ffn.shared_experts.W13` and `.W2` (one group),
//   `P.gate_up_proj_scales` / `P.down_proj_scales` (gpt-oss, experts fused in dim 0) -> `P.W13` / `P.W2`,
//   any other scale tensor with a packed weight beside it -> a layer of its own.
// A layer is MXFP4 when its weights are packed 4-bit codes (U8 or I8 bytes of two codes, or F4):
// a scale beside an FP8 or BF16 weight (V4-Flash's attention and its FP8 shared expert) belongs
// to no kernel layer and is reported as such. Each scale tensor's shape is checked against its
// weight's (K/32 scale bytes per K/2 code bytes along a row); a mismatch, a missing weight or
// partner, or shapes that disagree within a layer make the layer refused, never guessed around.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"

namespace mxdiff::checkpoint {

struct SelectionOptions {
  std::optional<std::string> pattern;  // ECMAScript regular expression, matched against whole names
};

enum class LayerKind : uint8_t { kRoutedW13, kRoutedW2, kSharedW13, kSharedW2, kFusedW13, kFusedW2, kSingle };
std::string_view LayerKindName(LayerKind kind);  // "routed-w13", ...

struct ScaleTensor {
  std::string name;
  TensorRef ref;
  std::string weight_name;          // the name its weight has by convention ("" if none applies)
  std::optional<TensorRef> weight;  // that tensor, when the checkpoint has it
  int layer = -1;                   // into AuditPlan::layers; -1: in no kernel layer
  uint64_t layer_offset = 0;        // where its bytes start in the layer's scale bytes (kernel order)
  std::string note;                 // why it is in no kernel layer
  std::string note_kind;            // the same without names, to group by ("weight is F8_E4M3, ...")
};

struct LayerProblem {
  std::string tensor;
  std::string message;
};

struct KernelLayer {
  std::string name;
  LayerKind kind = LayerKind::kSingle;
  std::vector<size_t> members;  // into AuditPlan::scales, in the kernel's byte order
  // The shape the kernels prepare it as (groups x N x K); all 0 when the tensors give none.
  int groups = 0;
  int n = 0;
  int k = 0;
  uint64_t scale_bytes = 0;
  std::vector<LayerProblem> problems;  // structural: any makes the layer refused
  std::vector<std::string> unread;     // tensors an index names in it that could not be read
};

struct AuditPlan {
  std::vector<ScaleTensor> scales;  // in natural name order ("layers.2" before "layers.10")
  std::vector<KernelLayer> layers;  // likewise
  std::vector<AuditError> errors;   // selection errors (a pattern selecting a multi-byte tensor)
};

// InvalidArgument for a pattern that is not a regular expression.
absl::StatusOr<AuditPlan> PlanAudit(const Checkpoint& checkpoint, const SelectionOptions& options);

// Empty when `weight` holds exactly the packed codes `scale` scales, else what disagrees.
std::string ShapeMismatch(const TensorInfo& scale, const TensorInfo& weight);
bool IsPackedFp4(Dtype weight_dtype);  // U8, I8 (two codes a byte) or F4

// "layers.2.x" < "layers.10.x": digit runs compare as numbers.
bool NaturalLess(std::string_view a, std::string_view b);

}  // namespace mxdiff::checkpoint
