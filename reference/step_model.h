// Arithmetic models of one m8n8k4 step: d = c + a0*b0 + a1*b1 + a2*b2 + a3*b3 with fp16
// a, b and fp32 c, d (docs/numerics.md: one m8n8k4 step). Each model is one implementation file; the reference
// GEMM takes the model as a parameter so the oracle follows the device under test.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace mxdiff {

enum class StepModel : uint8_t {
  kV100 = 0,           // HMMA.884 hardware: aligned, truncated, exactly summed, truncated
  kSm90Emulated = 1,   // nvcc 13 for sm_90: c + fma(a3,b3, fma(a2,b2, fma(a1,b1, fma(a0,b0,+0))))
  kSm90EmulatedFtz = 2,  // the same built with --use_fast_math: fp32 subnormals flush to zero
  kExact = 3,          // infinitely precise sum, rounded once to fp32 (nearest even)
};
inline constexpr int kStepModelCount = 4;

std::string_view StepModelName(StepModel model);  // "v100", "sm90-emulated", "sm90-emulated-ftz", "exact"
std::optional<StepModel> ParseStepModel(std::string_view name);

// One step on raw bits; NaN results are canonical 0x7FFFFFFF.
uint32_t Step(StepModel model, uint32_t c, std::span<const uint16_t, 4> a, std::span<const uint16_t, 4> b);

// The fp32 add the kernels use to reduce split partials (round to nearest even; the FTZ model
// flushes subnormal inputs and results, as the fast-math build does).
uint32_t ReduceAdd(StepModel model, uint32_t partial_sum, uint32_t partial);

// Steps chained over ascending k as the device does: step s consumes a[4s..4s+3], b[4s..4s+3]
// and the accumulator step s-1 left (c for s = 0). a and b hold the same multiple of 4 values.
uint32_t ChainSteps(StepModel model, uint32_t c, std::span<const uint16_t> a, std::span<const uint16_t> b);

// Every model, in enum order, for loops over models.
inline constexpr StepModel kAllStepModels[kStepModelCount] = {StepModel::kV100, StepModel::kSm90Emulated,
                                                              StepModel::kSm90EmulatedFtz, StepModel::kExact};

}  // namespace mxdiff
