// The fast path of the reference GEMM: eight output columns per AVX2 vector, one lane per
// output, every lane running exactly the scalar model's sequence of operations (the same
// roundings in the same order), so the bits equal the scalar path's (tested on random problems
// for every model). Weights are dequantized once per (group, n, k) into a k-major panel of
// kPanelK x 8 values that every row of the group reuses.
//
// Only this file is compiled for AVX2 + FMA, through the pragmas below (GCC's or clang's), and it is entered
// only after FastPathSupportedByCpu(). All headers come before the pragma so that no inline function shared
// with other files is compiled for AVX2; the AVX2 code itself uses only intrinsics and functions local to
// this file.
#include <immintrin.h>

#include <cstdint>

#include "reference/fp16.h"
#include "reference/gemm_plan.h"
#include "reference/step_model_hd.h"
#include "reference/step_model_internal.h"

namespace mxdiff::internal {

bool FastPathSupportedByCpu() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return supported;
}

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace {

constexpr int kLanes = kFastLanes;
constexpr int kPanelK = kFastPanelK;
constexpr int kPrefetchBytes = 128;  // packed codes ahead of the one being dequantized

// Rows r[j] (lane j, 8 consecutive k) become r[i] (k i, 8 lanes).
inline void Transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Codes 8..15 are the negatives of codes 0..7 in both transforms (dequantize multiplies with
// round-to-nearest, which is sign-symmetric), so a lane looks up the magnitude half of its
// scale's table and flips the sign by code bit 3. Only a NaN weight differs from the table (in
// its sign), and every NaN result is canonicalized at the output.
alignas(32) constexpr float kZeroTable[8] = {};
alignas(32) constexpr uint8_t kZeroCodes[kPanelK / 2] = {};

// panel[(k - k0) * 8 + lane] = weight of column n0 + lane at k, for k in [k0, k0 + count).
void DequantizePanel(const FastInputs& in, int group, int n0, int lanes, int k0, int count, float* panel) {
  const int k = in.k;
  const uint8_t* codes = in.packed_codes + (size_t(group) * size_t(in.n) + size_t(n0)) * size_t(k / 2);
  const uint8_t* scales = in.scale_bytes + (size_t(group) * size_t(in.n) + size_t(n0)) * size_t(k / kBlockK);
  const __m256i nibble_shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);  // low nibble = even k
  const __m256i nibble = _mm256_set1_epi32(0xF);
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  // Lanes past N read zero codes from a zero table: their results are computed and dropped.
  const uint8_t* lane_codes[kLanes];
  for (int lane = 0; lane < kLanes; ++lane) {
    lane_codes[lane] = lane < lanes ? codes + size_t(lane) * size_t(k / 2) + size_t(k0 / 2) : kZeroCodes;
  }
  for (int kk = 0; kk < count; kk += kBlockK) {
    const float* tables[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      tables[lane] =
          lane < lanes
              ? in.weight_f32 + scales[size_t(lane) * size_t(k / kBlockK) + size_t((k0 + kk) / kBlockK)] * 16
              : kZeroTable;
      // Eight rows 2 KB apart defeat the hardware prefetcher at this depth: fetch ahead by hand.
      _mm_prefetch(reinterpret_cast<const char*>(lane_codes[lane] + kk / 2) + kPrefetchBytes, _MM_HINT_T0);
    }
    for (int octet = 0; octet < 4; ++octet) {
      __m256 rows[kLanes];  // lane j: k0 + kk + 8 * octet + 0..7
      for (int lane = 0; lane < kLanes; ++lane) {
        int32_t word;  // eight codes
        __builtin_memcpy(&word, lane_codes[lane] + kk / 2 + 4 * octet, sizeof word);
        const __m256i shifted = _mm256_srlv_epi32(_mm256_set1_epi32(word), nibble_shifts);
        const __m256 magnitude =
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(tables[lane]), _mm256_and_si256(shifted, nibble));
        const __m256i flip = _mm256_and_si256(_mm256_slli_epi32(shifted, 28), sign);  // code bit 3
        rows[lane] = _mm256_xor_ps(magnitude, _mm256_castsi256_ps(flip));
      }
      Transpose8x8(rows);
      float* destination = panel + size_t(kk + 8 * octet) * kLanes;
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(destination + i * kLanes, rows[i]);
    }
  }
}

inline __m256 FlushSubnormals(__m256 x) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(int(0x80000000u)));
  const __m256 smallest_normal = _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000));
  const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), smallest_normal, _CMP_LT_OQ);
  return _mm256_blendv_ps(x, _mm256_and_ps(x, sign), tiny);
}

// The inputs of a run of steps for one row: activations from k_begin and the panel at k_begin.
struct StepRun {
  const float* a;             // fp32 activations
  const int32_t* a_exponent;  // GemmPlan::activation_v100_exponent
  const uint16_t* a_bits;     // fp16 activations, for the per-lane fallback
  const float* panel;         // 8 lanes per k
  int steps;
};

// One step of the scalar model per lane: the fallback for lanes with special values and the
// exact model's path (its accumulator is not a vector operation).
__m256 StepPerLane(uint32_t (*step)(uint32_t, StepInputs, StepInputs), __m256 acc, const uint16_t* a_bits,
                   const float* panel) {
  alignas(32) uint32_t c[kLanes];
  _mm256_store_ps(reinterpret_cast<float*>(c), acc);
  for (int lane = 0; lane < kLanes; ++lane) {
    uint16_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = f32_to_f16_rne(panel[i * kLanes + lane]);  // exact: fp16 values
    c[lane] = step(c[lane], a_bits, b);
  }
  return _mm256_load_ps(reinterpret_cast<const float*>(c));
}

__m256 StepsSm90(__m256 acc, const StepRun& run) {
  const __m256 zero = _mm256_setzero_ps();
  for (int s = 0; s < run.steps; ++s) {
    const float* a = run.a + 4 * s;
    const float* w = run.panel + 32 * s;
    __m256 t = _mm256_fmadd_ps(_mm256_set1_ps(a[0]), _mm256_loadu_ps(w), zero);
    t = _mm256_fmadd_ps(_mm256_set1_ps(a[1]), _mm256_loadu_ps(w + 8), t);
    t = _mm256_fmadd_ps(_mm256_set1_ps(a[2]), _mm256_loadu_ps(w + 16), t);
    t = _mm256_fmadd_ps(_mm256_set1_ps(a[3]), _mm256_loadu_ps(w + 24), t);
    acc = _mm256_add_ps(acc, t);
  }
  return acc;
}

__m256 StepsSm90Ftz(__m256 acc, const StepRun& run) {
  const __m256 zero = _mm256_setzero_ps();
  for (int s = 0; s < run.steps; ++s) {
    const float* a = run.a + 4 * s;
    const float* w = run.panel + 32 * s;
    __m256 t = FlushSubnormals(_mm256_fmadd_ps(_mm256_set1_ps(a[0]), _mm256_loadu_ps(w), zero));
    t = FlushSubnormals(_mm256_fmadd_ps(_mm256_set1_ps(a[1]), _mm256_loadu_ps(w + 8), t));
    t = FlushSubnormals(_mm256_fmadd_ps(_mm256_set1_ps(a[2]), _mm256_loadu_ps(w + 16), t));
    t = FlushSubnormals(_mm256_fmadd_ps(_mm256_set1_ps(a[3]), _mm256_loadu_ps(w + 24), t));
    acc = FlushSubnormals(_mm256_add_ps(FlushSubnormals(acc), t));
  }
  return acc;
}

// One V100 step's products of every lane, taken apart for the integer sum: each product's
// significand (0 for a zero product), fp32 field and sign (all ones where negative), the largest
// alignment exponent over c and the products (an fp32 field), and which lanes hold an Inf or NaN.
struct V100Products {
  __m256i significand[4], exponent[4], negative[4];
  __m256i largest;
  __m256i special;
};

// The helpers of StepsV100 are force-inlined: they are its loop body, cut into its stages.
[[gnu::always_inline]] inline V100Products V100TakeApartProducts(__m256i acc, __m256i c_field, __m256i c_exponent,
                                                                 const float* a, const int32_t* a_exponent,
                                                                 const float* w) {
  const __m256i field_mask = _mm256_set1_epi32(0xFF);
  const __m256i fraction_mask = _mm256_set1_epi32(0x7FFFFF);
  const __m256i implicit_bit = _mm256_set1_epi32(0x800000);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i subnormal_fp16_exponent = _mm256_set1_epi32(113);  // 2^-14 as an fp32 field
  V100Products p;
  const __m256i c_zero = _mm256_cmpeq_epi32(_mm256_and_si256(acc, magnitude_mask), zero);
  p.largest = _mm256_andnot_si256(c_zero, c_exponent);
  p.special = _mm256_cmpeq_epi32(c_field, field_mask);
  for (int i = 0; i < 4; ++i) {
    const __m256 b = _mm256_loadu_ps(w + 8 * i);
    const __m256i product = _mm256_castps_si256(_mm256_mul_ps(_mm256_set1_ps(a[i]), b));  // exact
    const __m256i field = _mm256_and_si256(_mm256_srli_epi32(product, 23), field_mask);
    p.special = _mm256_or_si256(p.special, _mm256_cmpeq_epi32(field, field_mask));
    const __m256i product_zero = _mm256_cmpeq_epi32(field, zero);  // products are never subnormal
    const __m256i b_exponent = _mm256_max_epi32(
        _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(b), 23), field_mask), subnormal_fp16_exponent);
    // (ea + 127) + (eb + 127) - 127: the product's alignment exponent as an fp32 field.
    const __m256i alignment = _mm256_add_epi32(_mm256_set1_epi32(a_exponent[i] - 127), b_exponent);
    p.largest = _mm256_max_epi32(p.largest, _mm256_andnot_si256(product_zero, alignment));
    p.significand[i] =
        _mm256_andnot_si256(product_zero, _mm256_or_si256(_mm256_and_si256(product, fraction_mask), implicit_bit));
    p.exponent[i] = field;
    p.negative[i] = _mm256_srai_epi32(product, 31);
  }
  return p;
}

// The terms (products and c) on the grid 2^(largest - 150), truncated toward zero, summed exactly.
[[gnu::always_inline]] inline __m256i V100SumOnGrid(const V100Products& p, __m256i acc, __m256i c_field,
                                                    __m256i c_exponent) {
  const __m256i fraction_mask = _mm256_set1_epi32(0x7FFFFF);
  const __m256i implicit_bit = _mm256_set1_epi32(0x800000);
  const __m256i zero = _mm256_setzero_si256();
  __m256i sum = zero;
  for (int i = 0; i < 4; ++i) {
    const __m256i left = _mm256_max_epi32(_mm256_sub_epi32(p.exponent[i], p.largest), zero);
    const __m256i right = _mm256_max_epi32(_mm256_sub_epi32(p.largest, p.exponent[i]), zero);
    const __m256i aligned = _mm256_srlv_epi32(_mm256_sllv_epi32(p.significand[i], left), right);
    sum = _mm256_add_epi32(sum, _mm256_sub_epi32(_mm256_xor_si256(aligned, p.negative[i]), p.negative[i]));
  }
  const __m256i c_significand = _mm256_or_si256(_mm256_and_si256(acc, fraction_mask),
                                                _mm256_andnot_si256(_mm256_cmpeq_epi32(c_field, zero), implicit_bit));
  // c's unit is 2^(c_exponent - 150); a zero c has no significand, whatever the shift.
  const __m256i aligned = _mm256_srlv_epi32(c_significand, _mm256_sub_epi32(p.largest, c_exponent));
  const __m256i c_negative = _mm256_srai_epi32(acc, 31);
  return _mm256_add_epi32(sum, _mm256_sub_epi32(_mm256_xor_si256(aligned, c_negative), c_negative));
}

// |sum| x 2^(largest - 150) truncated toward zero to fp32 bits, with sum's sign (+0 for 0).
[[gnu::always_inline]] inline __m256i V100TruncateToF32(__m256i sum, __m256i largest) {
  const __m256i sign_bit = _mm256_set1_epi32(int(0x80000000u));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i sum_negative = _mm256_srai_epi32(sum, 31);
  const __m256i magnitude = _mm256_abs_epi32(sum);
  // floor(log2 |sum|): the conversion may round up across a power of two; step back then.
  __m256i top = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(magnitude)), 23),
                                 _mm256_set1_epi32(127));
  top = _mm256_add_epi32(top, _mm256_cmpgt_epi32(_mm256_sllv_epi32(one, top), magnitude));
  // Shift so that 24 bits remain, but not below the subnormal unit 2^-149.
  const __m256i shift = _mm256_max_epi32(_mm256_sub_epi32(top, _mm256_set1_epi32(23)), _mm256_sub_epi32(one, largest));
  const __m256i kept =
      _mm256_srlv_epi32(_mm256_sllv_epi32(magnitude, _mm256_max_epi32(_mm256_sub_epi32(zero, shift), zero)),
                        _mm256_max_epi32(shift, zero));
  const __m256i field = _mm256_add_epi32(largest, shift);
  __m256i bits = _mm256_add_epi32(_mm256_slli_epi32(_mm256_sub_epi32(field, one), 23), kept);
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7F800000), _mm256_cmpgt_epi32(field, _mm256_set1_epi32(254)));
  bits = _mm256_or_si256(bits, _mm256_and_si256(sum_negative, sign_bit));
  return _mm256_andnot_si256(_mm256_cmpeq_epi32(sum, zero), bits);  // an exact zero sum is +0
}

// The V100 step on integers (the model of step_model_v100.cc, written for lanes): exponents
// from the fp32 bit fields, terms truncated by variable shifts, summed as int32 (|sum| < 2^28),
// the sum truncated to fp32 by normalizing shifts. Steps with Inf or NaN in any lane go lane by
// lane through the scalar model.
__m256 StepsV100(__m256 acc_f32, const StepRun& run) {
  const __m256i field_mask = _mm256_set1_epi32(0xFF);
  const __m256i one = _mm256_set1_epi32(1);
  __m256i acc = _mm256_castps_si256(acc_f32);
  for (int s = 0; s < run.steps; ++s) {
    const float* w = run.panel + 32 * s;
    const __m256i c_field = _mm256_and_si256(_mm256_srli_epi32(acc, 23), field_mask);
    const __m256i c_exponent = _mm256_max_epi32(c_field, one);
    const V100Products products =
        V100TakeApartProducts(acc, c_field, c_exponent, run.a + 4 * s, run.a_exponent + 4 * s, w);
    if (_mm256_movemask_epi8(products.special) != 0) {
      acc = _mm256_castps_si256(StepPerLane(StepV100, _mm256_castsi256_ps(acc), run.a_bits + 4 * s, w));
      continue;
    }
    const __m256i sum = V100SumOnGrid(products, acc, c_field, c_exponent);
    acc = V100TruncateToF32(sum, products.largest);
  }
  return _mm256_castsi256_ps(acc);
}

// The exact model's step compiled here (MXDIFF_HD always inlines), without the fuzzing build's
// sanitizers and coverage like the rest of this file: step_model_exact.cc's copy is instrumented
// for fuzz_reference, and made fuzz_gemm's `exact` cases of the fuzzing build 5 to 30 times slower.
uint32_t StepExactInlined(uint32_t c, StepInputs a, StepInputs b) { return hd::StepExact(c, a, b); }

__m256 StepsExact(__m256 acc, const StepRun& run) {
  for (int s = 0; s < run.steps; ++s)
    acc = StepPerLane(StepExactInlined, acc, run.a_bits + 4 * s, run.panel + 32 * s);
  return acc;
}

template <StepModel kModel>
__m256 RunSteps(__m256 acc, const StepRun& run) {
  if constexpr (kModel == StepModel::kSm90Emulated) return StepsSm90(acc, run);
  if constexpr (kModel == StepModel::kSm90EmulatedFtz) return StepsSm90Ftz(acc, run);
  if constexpr (kModel == StepModel::kV100) return StepsV100(acc, run);
  if constexpr (kModel == StepModel::kExact) return StepsExact(acc, run);
}

// ReduceAdd() for 8 lanes: fp32 add, nearest even; FTZ flushes inputs and result.
template <StepModel kModel>
__m256 ReduceLanes(__m256 sum, __m256 partial) {
  if constexpr (kModel == StepModel::kSm90EmulatedFtz) {
    return FlushSubnormals(_mm256_add_ps(FlushSubnormals(sum), FlushSubnormals(partial)));
  } else {
    return _mm256_add_ps(sum, partial);
  }
}

template <StepModel kModel>
void RunBlock(const FastInputs& in, int group, int n0, float* panel, float* state, uint32_t* output) {
  const int k = in.k;
  const int lanes = in.n - n0 < kLanes ? in.n - n0 : kLanes;
  const int row_begin = in.row_offsets[group];
  const int rows = in.row_offsets[group + 1] - row_begin;
  // Per row: accumulator (8 lanes), then the reduced sum of the finished splits (8 lanes).
  for (int i = 0; i < rows * 2 * kLanes; ++i) state[i] = 0.0f;

  int split = 0;  // the split that holds block_begin
  for (int block_begin = 0; block_begin < k; block_begin += kPanelK) {
    const int block_end = block_begin + kPanelK < k ? block_begin + kPanelK : k;
    DequantizePanel(in, group, n0, lanes, block_begin, block_end - block_begin, panel);
    while (in.splits[split].end <= block_begin) ++split;
    for (int row = 0; row < rows; ++row) {
      const size_t row_offset = size_t(row_begin + row) * size_t(k);
      float* row_state = state + row * 2 * kLanes;
      __m256 acc = _mm256_loadu_ps(row_state);
      __m256 reduced = _mm256_loadu_ps(row_state + kLanes);
      for (int s = split, begin = block_begin; begin < block_end; ++s) {
        const KRange range = in.splits[s];
        if (begin == range.begin && s > 0) {  // split s - 1 is complete: reduce it, start from +0
          reduced = s - 1 == 0 ? acc : ReduceLanes<kModel>(reduced, acc);
          acc = _mm256_setzero_ps();
        }
        const int end = range.end < block_end ? range.end : block_end;
        const StepRun run{in.activation_f32 + row_offset + begin,
                          in.activation_v100_exponent + row_offset + begin,
                          in.activation_bits + row_offset + begin, panel + (begin - block_begin) * kLanes,
                          (end - begin) / 4};
        acc = RunSteps<kModel>(acc, run);
        begin = end;
      }
      _mm256_storeu_ps(row_state, acc);
      _mm256_storeu_ps(row_state + kLanes, reduced);
    }
  }
  const __m256 canonical_nan = _mm256_castsi256_ps(_mm256_set1_epi32(int(kF32CanonicalNaN)));
  for (int row = 0; row < rows; ++row) {
    const float* row_state = state + row * 2 * kLanes;
    const __m256 acc = _mm256_loadu_ps(row_state);
    __m256 result = in.split_count == 1 ? acc : ReduceLanes<kModel>(_mm256_loadu_ps(row_state + kLanes), acc);
    result = _mm256_blendv_ps(result, canonical_nan, _mm256_cmp_ps(result, result, _CMP_UNORD_Q));
    alignas(32) uint32_t bits[kLanes];
    _mm256_store_ps(reinterpret_cast<float*>(bits), result);
    uint32_t* destination = output + size_t(row_begin + row) * size_t(in.n) + size_t(n0);
    for (int lane = 0; lane < lanes; ++lane) destination[lane] = bits[lane];
  }
}

}  // namespace

void RunFastColumnBlock(const FastInputs& inputs, int group, int n0, float* panel, float* state,
                        uint32_t* output) {
  switch (inputs.model) {
    case StepModel::kV100:
      return RunBlock<StepModel::kV100>(inputs, group, n0, panel, state, output);
    case StepModel::kSm90Emulated:
      return RunBlock<StepModel::kSm90Emulated>(inputs, group, n0, panel, state, output);
    case StepModel::kSm90EmulatedFtz:
      return RunBlock<StepModel::kSm90EmulatedFtz>(inputs, group, n0, panel, state, output);
    case StepModel::kExact:
      return RunBlock<StepModel::kExact>(inputs, group, n0, panel, state, output);
  }
}

void RunFastStepLanes(StepModel model, const uint32_t c[8], const uint16_t a[4], const uint16_t b[4][8],
                      uint32_t d[8]) {
  float panel[4 * kLanes];
  float a_f32[4];
  int32_t a_exponent[4];
  for (int i = 0; i < 4; ++i) {
    for (int lane = 0; lane < kLanes; ++lane) panel[i * kLanes + lane] = f16_to_f32(b[i][lane]);
    a_f32[i] = f16_to_f32(a[i]);
    const int32_t field = int32_t(f32_to_bits(a_f32[i]) >> 23) & 0xFF;
    a_exponent[i] = field > 113 ? field : 113;
  }
  const StepRun run{a_f32, a_exponent, a, panel, 1};
  const __m256 acc = _mm256_loadu_ps(reinterpret_cast<const float*>(c));
  __m256 result = acc;
  switch (model) {
    case StepModel::kV100:
      result = RunSteps<StepModel::kV100>(acc, run);
      break;
    case StepModel::kSm90Emulated:
      result = RunSteps<StepModel::kSm90Emulated>(acc, run);
      break;
    case StepModel::kSm90EmulatedFtz:
      result = RunSteps<StepModel::kSm90EmulatedFtz>(acc, run);
      break;
    case StepModel::kExact:
      result = RunSteps<StepModel::kExact>(acc, run);
      break;
  }
  _mm256_storeu_ps(reinterpret_cast<float*>(d), result);
}

}  // namespace mxdiff::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
