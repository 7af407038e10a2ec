// The reference grouped GEMM: the oracle. Output bits are exactly what the kernel writes for
// the given transform, model and split partition (FACTS.md §6): per split, an accumulator
// from +0 stepping over ascending k four at a time; splits reduced serially in order with
// fp32 adds; the last fp32 value rounded to fp16 (nearest even, canonical NaN).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/problem.h"
#include "reference/step_model.h"
#include "reference/transform.h"

namespace mxdiff {

struct ReferenceOptions {
  Transform transform = Transform::kOrdinary;
  StepModel model = StepModel::kSm90Emulated;
  Tactic tactic;     // only cta_k and splits matter for the bits
  int threads = 0;   // 0: all hardware threads
};

// Writes M x N fp16 bits into `output` (resized). InvalidArgument for a bad problem or tactic.
absl::Status ReferenceGemm(const GroupedProblem& problem, const ReferenceOptions& options,
                           std::vector<uint16_t>& output);

// The fp32 value before the final fp16 rounding, same order and bits as ReferenceGemm.
absl::Status ReferenceGemmF32(const GroupedProblem& problem, const ReferenceOptions& options,
                              std::vector<uint32_t>& output);

// Every accumulator state of one output element, for tools/repro to find the first divergent
// step. Steps are listed split by split in reduction order.
struct TraceStep {
  int split = 0;
  int k = 0;               // first k of this step (a multiple of 4); -1 for a reduction add
  uint32_t accumulator = 0;  // fp32 bits after the step
};
struct ElementTrace {
  std::vector<TraceStep> steps;
  uint32_t result_f32 = 0;
  uint16_t result_f16 = 0;
};
absl::StatusOr<ElementTrace> TraceElement(const GroupedProblem& problem, const ReferenceOptions& options,
                                          int row, int column);

}  // namespace mxdiff
