// What one reference GEMM call computes once and every output shares: the split ranges, the
// dequantized weight of every (scale byte, code) pair for the call's transform, and the
// activations widened to fp32. Internal to the reference library.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "reference/problem.h"
#include "reference/split_plan.h"
#include "reference/step_model.h"
#include "reference/transform.h"

namespace mxdiff::internal {

// Every (scale byte, code) weight of one transform; built once per process and transform,
// since fuzzers call the oracle on many tiny problems.
struct DequantTable {
  std::array<uint16_t, 256 * 16> f16;  // [raw * 16 + code]: dequantize(transform, code, scale)
  alignas(64) std::array<float, 256 * 16> f32;  // the same values widened (exactly)
};
const DequantTable& DequantTableFor(Transform transform);

struct GemmPlan {
  const GroupedProblem* problem = nullptr;
  StepModel model = StepModel::kSm90Emulated;
  std::vector<KRange> splits;  // reduction order
  const DequantTable* weights = nullptr;
  std::vector<float> activation_f32;                   // M x K
  // max(fp32 exponent field, 113) of each activation: the exponent the V100 alignment counts
  // (a subnormal fp16 factor counts at 2^-14).
  std::vector<int32_t> activation_v100_exponent;  // M x K
};

GemmPlan BuildGemmPlan(const GroupedProblem& problem, Transform transform, StepModel model,
                       const Tactic& tactic);

// The fast path (gemm_fast_avx2.cc) sees the plan as plain pointers only: the file is compiled
// for AVX2 and must not instantiate library templates (an AVX2 copy of a shared inline function
// could be the one the linker keeps for every caller).
inline constexpr int kFastLanes = 8;     // output columns per vector
inline constexpr int kFastPanelK = 256;  // k per dequantized panel: a multiple of 32 and of 4

struct FastInputs {
  StepModel model;
  int n, k;
  const int32_t* row_offsets;  // groups + 1
  const KRange* splits;
  int split_count;
  const uint8_t* packed_codes;  // all groups
  const uint8_t* scale_bytes;   // all groups
  const float* weight_f32;      // DequantTable::f32
  const float* activation_f32;
  const int32_t* activation_v100_exponent;
  const uint16_t* activation_bits;
};
FastInputs MakeFastInputs(const GemmPlan& plan);

bool FastPathSupportedByCpu();
// Computes the fp32 results (canonical NaN) of columns [n0, n0 + 8) clipped to N, for every row
// of `group`, into output (M x N). panel holds kFastPanelK x kFastLanes floats, state
// 2 x kFastLanes floats per row of the group.
void RunFastColumnBlock(const FastInputs& inputs, int group, int n0, float* panel, float* state,
                        uint32_t* output);

// One step of the fast path's 8-lane code with arbitrary inputs (the GEMM only ever feeds it
// dequantized weights): lane j computes Step(model, c[j], a, b[.][j]). NaN results may carry any
// payload (the GEMM canonicalizes once at the end). Lets tests compare it with Step() directly.
void RunFastStepLanes(StepModel model, const uint32_t c[8], const uint16_t a[4], const uint16_t b[4][8],
                      uint32_t d[8]);

}  // namespace mxdiff::internal
