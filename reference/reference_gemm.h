// The reference grouped GEMM: the oracle. Output bits are exactly what the kernel writes for
// the given transform, model and split partition (docs/numerics.md: reduction order): per split, an accumulator
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

// Which implementation computes the (identical) bits: the scalar path calls Step() and
// ReduceAdd() per output element; the fast path vectorizes across 8 output columns (AVX2/FMA,
// same order of operations inside every output). kAuto takes the fast path where the CPU
// supports it.
enum class ReferencePath : uint8_t { kAuto = 0, kScalar = 1, kFast = 2 };

struct ReferenceOptions {
  Transform transform = Transform::kOrdinary;
  StepModel model = StepModel::kSm90Emulated;
  Tactic tactic;     // only cta_k and splits matter for the bits
  int threads = 0;   // 0: all hardware threads (a small problem runs on the calling thread)
  ReferencePath path = ReferencePath::kAuto;  // kFast where unsupported: Unimplemented error
};

// Whether this CPU runs the fast path (AVX2 and FMA).
bool ReferenceFastPathAvailable();

// Writes M x N fp16 bits into `output` (resized). InvalidArgument for a bad problem or tactic,
// ResourceExhausted beyond 2^31 outputs, Unimplemented for ReferencePath::kFast without AVX2/FMA.
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
