// What one reference GEMM call computes once and every output shares: the split ranges, the
// dequantized weight of every (scale byte, code) pair for the call's transform, and the
// activations widened to fp32. Internal to the reference library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reference/fp16.h"
#include "reference/mx_spec.h"
#include "reference/problem.h"
#include "reference/split_plan.h"
#include "reference/step_model.h"
#include "reference/transform.h"

namespace mxdiff::internal {

// Every (scale byte, code) weight of one transform; built once per process and transform,
// since fuzzers call the oracle on many tiny problems.
// The V100 model's alignment field of an fp16 factor for the AVX-512 path: max(fp32 exponent
// field, 113) (a subnormal factor counts at 2^-14), kV100ZeroField for a zero (its product is
// skipped: any sum with it stays negative), 255 for Inf and NaN.
inline constexpr int32_t kV100ZeroField = -(1 << 20);
inline int32_t V100Field(uint16_t h) {
  if ((h & 0x7FFF) == 0) return kV100ZeroField;
  const int32_t field = int32_t(f32_to_bits(f16_to_f32(h)) >> 23) & 0xFF;
  return field > 113 ? field : 113;
}

// Each E2M1 code's value as fp32 (codes 8..15 negated, 8 is -0) and its fp32 exponent field
// (kV100ZeroField for a zero), from mx_spec.h's one value table: the plain-scale test
// (reference_gemm.cc) and the AVX-512 path's vector lookups (64-byte aligned loads).
struct alignas(64) E2m1Tables {
  float value[16];
  int32_t field[16];
};
inline constexpr E2m1Tables kE2m1 = [] {
  E2m1Tables tables{};
  for (int code = 0; code < 16; ++code) {
    const int halves = kE2m1MagnitudeHalves[code & 7];
    tables.value[code] = (code & 8) ? -float(halves) / 2.0f : float(halves) / 2.0f;
    int field = 126;  // halves 1: 0.5 = 2^-1
    for (int h = halves; h > 1; h >>= 1) ++field;
    tables.field[code] = halves == 0 ? kV100ZeroField : field;
  }
  return tables;
}();

// For the AVX-512 path: a scale byte is "plain" when every code's weight equals
// E2M1(code) x scale[raw] (scale[raw] being the weight of code 2, the value 1), and plain for
// v100 when also every nonzero weight's V100Field is E2M1 field(code) + field_shift[raw]. Both
// are derived from the table itself (BuildDequantTable), never assumed; other bytes make the
// fast path look weights up in the table.
inline constexpr int32_t kNotPlainValue = 1;
inline constexpr int32_t kNotPlainV100 = 2;  // set whenever kNotPlainValue is
struct WideTables {
  alignas(64) float scale[256];
  alignas(64) int32_t field_shift[256];
  alignas(64) int32_t not_plain[256];
  // The vector code computes a plain byte's scale and shift as WideScaleBits / WideFieldShift
  // and checks a block's bytes against one range each ([plain_low, plain_high] for the values,
  // [v100_low, v100_high] for v100): the largest range around 127 of plain bytes where the
  // formulas equal scale[] and field_shift[] (BuildDequantTable; empty when low > high).
  bool zero_scale_at_a0;  // the ordinary transform: raw <= 112 scales to 0
  uint8_t plain_low, plain_high, v100_low, v100_high;
};
// a = clamp(raw - 112, 0, 30); the scale 2^(a - 15) (0 for a = 0 where zero_scale_at_a0) and
// the V100Field shift a - 15.
inline uint32_t WideScaleBits(int raw, bool zero_scale_at_a0) {
  const int a = raw < 112 ? 0 : (raw - 112 > 30 ? 30 : raw - 112);
  return a == 0 && zero_scale_at_a0 ? 0u : uint32_t(a + 112) << 23;
}
inline int32_t WideFieldShift(int raw) { return (raw < 112 ? 0 : (raw - 112 > 30 ? 30 : raw - 112)) - 15; }

struct DequantTable {
  std::array<uint16_t, 256 * 16> f16;  // [raw * 16 + code]: dequantize(transform, code, scale)
  alignas(64) std::array<float, 256 * 16> f32;  // the same values widened (exactly)
  alignas(64) std::array<int32_t, 256 * 16> v100_field;  // V100Field of each weight
  WideTables wide;
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
  std::vector<int32_t> activation_v100_field;     // M x K, V100Field (v100 only, for the AVX-512 path)
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
  // The AVX-512 path's extras.
  const int32_t* weight_v100_field;  // DequantTable::v100_field
  const WideTables* wide;
  const int32_t* activation_v100_field;
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

// The AVX-512 path (gemm_fast_avx512.cc): 16 columns per vector, kWideVectors vectors per work
// item, one 32-k block dequantized at a time. Models v100, sm90-emulated and sm90-emulated-ftz
// (the exact model runs on the AVX2 path).
inline constexpr int kWideLanes = 16;
inline constexpr int kWideVectors = 2;
inline constexpr int kWideColumns = kWideLanes * kWideVectors;
inline constexpr size_t kWidePanelBytes = 2 * size_t(kWideVectors) * 32 * kWideLanes * 4;
struct WideScratch {
  void* panel;      // kWidePanelBytes, 64-byte aligned
  uint8_t* scales;  // K / 32 x kWideColumns
  float* state;     // rows of the group x kWideVectors x 2 x kWideLanes
};
bool Avx512PathSupportedByCpu();
void RunWideColumnBlock(const FastInputs& inputs, int group, int n0, const WideScratch& scratch, uint32_t* output);
// One step of the AVX-512 code with arbitrary inputs, as RunFastStepLanes; false for the exact
// model (not on this path).
bool RunWideStepLanes(StepModel model, const uint32_t c[16], const uint16_t a[4], const uint16_t b[4][16],
                      uint32_t d[16]);

}  // namespace mxdiff::internal
