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
// ReduceAdd() per output element; the fast path vectorizes across output columns (same order of
// operations inside every output): 16 columns per AVX-512 vector where the CPU has AVX-512
// (F, BW, DQ, VL; every model but exact), else 8 per AVX2/FMA vector. kAuto takes the fast path
// where the CPU supports it; kFastAvx2 forces the AVX2 flavour (tests and benchmark).
enum class ReferencePath : uint8_t { kAuto = 0, kScalar = 1, kFast = 2, kFastAvx2 = 3 };

struct ReferenceOptions {
  Transform transform = Transform::kOrdinary;
  StepModel model = StepModel::kSm90Emulated;
  Tactic tactic;     // only cta_k and splits matter for the bits
  int threads = 0;   // 0: all hardware threads (a small problem runs on the calling thread)
  ReferencePath path = ReferencePath::kAuto;  // kFast where unsupported: Unimplemented error
};

// Whether this CPU runs the fast path (AVX2 and FMA).
bool ReferenceFastPathAvailable();
// Whether the fast path runs its AVX-512 flavour on this CPU.
bool ReferenceAvx512PathAvailable();

// The checks every reference (this one, reference/device/) makes before it computes, so that
// both oracles refuse the same inputs: the problem, the tactic, the model and transform in
// range (InvalidArgument), at most 2^31 outputs (ResourceExhausted).
absl::Status ValidateReferenceInputs(const GroupedProblem& problem, const ReferenceOptions& options);

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
