// The AVX-512 fast path of the reference GEMM: sixteen output columns per vector, two vectors
// (32 columns) per work item so that two independent accumulator chains overlap, every lane
// running exactly the scalar model's roundings in the same order (tested against the scalar path
// on random problems for every model, and step by step against Step()).
//
// What makes it faster than gemm_fast_avx2.cc (decode shapes have one row per group, so every
// weight is dequantized for one use and the accumulator chain is the critical path):
// - dequantization: the packed codes of 16 columns are transposed as 32-bit words (eight codes
//   of one column per lane), and a weight is one 16-entry permute of the E2M1 values (the same
//   register for every lane) times the lane's scale. That product equals the definitional
//   table's value only for "plain" scale bytes, which DequantTable derives by comparing every
//   (scale byte, code) with the table; a block with any other scale byte looks its weights up
//   in the table by gather.
// - v100: no per-lane fallback. Terms are truncated onto the grid by a power-of-two multiply and
//   a truncating conversion, summed as int32 and converted back with round-toward-zero; the
//   lanes where the model's special-value rules or "all products zero" decide the result take
//   the fp32 sum c + products instead (IEEE gives exactly those rules; see StepsV100 below).
// - the exact model stays on the AVX2 path (its step is the scalar model per lane anyway).
//
// Entered only after Avx512PathSupportedByCpu(). As in gemm_fast_avx2.cc, all headers come
// before the target pragma so that no shared inline function is compiled for AVX-512.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "reference/fp16.h"
#include "reference/gemm_plan.h"
#include "reference/step_model_internal.h"

namespace mxdiff::internal {

bool Avx512PathSupportedByCpu() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return supported;
}

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which it reports as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

constexpr int kLanes = kWideLanes;      // 16
constexpr int kVectors = kWideVectors;  // 2
constexpr int kBlockSteps = kBlockK / 4;
constexpr int kInfOrNan = 0x01 | 0x08 | 0x10 | 0x80;  // fpclass: QNaN, +Inf, -Inf, SNaN
constexpr int kDenormal = 0x20;

alignas(64) constexpr uint8_t kZeroCodes[64] = {};

// One 32-k block of one 16-column vector, k-major: w[k][lane] and (v100) field[k][lane].
struct Panel {
  alignas(64) float w[kVectors][kBlockK][kLanes];
  alignas(64) int32_t field[kVectors][kBlockK][kLanes];
};
static_assert(sizeof(Panel) == kWidePanelBytes);

// The eight codes k = 8d .. 8d+7 of each lane's column as words[d], d = 0..3, from 16 bytes of
// each column's packed row.
inline void TransposeCodes(const uint8_t* const rows[kLanes], int offset, __m512i words[4]) {
  __m512i q[4];
  for (int j = 0; j < 4; ++j) {
    const uint8_t* const* r = rows + 4 * j;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + offset)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + offset)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + offset)), 2);
    q[j] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + offset)), 3);
  }
  // q[j]: row 4j + i in 128-bit lane i, its words 0..3. First rows 0..7 (8..15) of words 0,1
  // and of words 2,3, then the two halves side by side.
  const __m512i even = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i odd = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  const __m512i a0 = _mm512_permutex2var_epi32(q[0], even, q[1]);
  const __m512i a1 = _mm512_permutex2var_epi32(q[0], odd, q[1]);
  const __m512i b0 = _mm512_permutex2var_epi32(q[2], even, q[3]);
  const __m512i b1 = _mm512_permutex2var_epi32(q[2], odd, q[3]);
  words[0] = _mm512_shuffle_i64x2(a0, b0, 0x44);
  words[1] = _mm512_shuffle_i64x2(a0, b0, 0xEE);
  words[2] = _mm512_shuffle_i64x2(a1, b1, 0x44);
  words[3] = _mm512_shuffle_i64x2(a1, b1, 0xEE);
}

// Four blocks at once: 64 bytes (one cache line when aligned) of each of 16 rows, as 16 x 16
// words: words[block][d] holds word 4 * block + d of every row (lane = row).
inline void TransposeCodes4(const uint8_t* const rows[kLanes], int offset, __m512i words[4][4]) {
  __m512i r[16], t[16], u[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(rows[i] + offset);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g + m], 128-bit lane l: rows 4g..4g+3 of word 4l + m
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
    words[0][m] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    words[1][m] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    words[2][m] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    words[3][m] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

// A block's 16 scale bytes: whether all are plain (for the values, or for v100 also the
// fields), and their scales and field shifts by the formulas of gemm_plan.h (WideScaleBits,
// WideFieldShift).
struct BlockScales {
  bool plain;
  __m512i raw;
  __m512 scale;
  __m512i shift;
};
template <bool kFields>
inline BlockScales ReadScales(const WideTables& tables, const uint8_t* bytes) {
  const __m128i raw8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const uint8_t low = kFields ? tables.v100_low : tables.plain_low;
  const uint8_t high = kFields ? tables.v100_high : tables.plain_high;
  const __mmask16 in_range = _mm_cmpge_epu8_mask(raw8, _mm_set1_epi8(char(low))) &
                             _mm_cmple_epu8_mask(raw8, _mm_set1_epi8(char(high)));
  BlockScales result;
  result.plain = in_range == 0xFFFF;
  result.raw = _mm512_cvtepu8_epi32(raw8);
  const __m512i a = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(result.raw, _mm512_set1_epi32(112)),
                                                      _mm512_setzero_si512()),
                                     _mm512_set1_epi32(30));
  __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(112)), 23);
  if (tables.zero_scale_at_a0) bits = _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(a, _mm512_setzero_si512()), bits);
  result.scale = _mm512_castsi512_ps(bits);
  result.shift = _mm512_sub_epi32(a, _mm512_set1_epi32(15));
  return result;
}

// Dequantizes one 32-k block of vector v (transposed codes) into the panel.
template <bool kFields>
void DequantizeBlock(const FastInputs& in, const __m512i words[4], const BlockScales& scales, int v, Panel& panel) {
  if (scales.plain) {
    const __m512 values = _mm512_load_ps(kE2m1.value);
    const __m512i field_table = _mm512_load_si512(kE2m1.field);
    for (int d = 0; d < 4; ++d) {
      for (int j = 0; j < 8; ++j) {
        const __m512i index = _mm512_srli_epi32(words[d], 4 * j);  // the permutes read bits 3..0
        _mm512_store_ps(panel.w[v][8 * d + j], _mm512_mul_ps(_mm512_permutexvar_ps(index, values), scales.scale));
        if (kFields) {
          _mm512_store_si512(panel.field[v][8 * d + j],
                             _mm512_add_epi32(_mm512_permutexvar_epi32(index, field_table), scales.shift));
        }
      }
    }
    return;
  }
  const __m512i base = _mm512_slli_epi32(scales.raw, 4);
  const __m512i nibble = _mm512_set1_epi32(0xF);
  for (int d = 0; d < 4; ++d) {
    for (int j = 0; j < 8; ++j) {
      const __m512i index = _mm512_add_epi32(base, _mm512_and_si512(_mm512_srli_epi32(words[d], 4 * j), nibble));
      _mm512_store_ps(panel.w[v][8 * d + j], _mm512_i32gather_ps(index, in.weight_f32, 4));
      if (kFields) {
        _mm512_store_si512(panel.field[v][8 * d + j], _mm512_i32gather_epi32(index, in.weight_v100_field, 4));
      }
    }
  }
}

// 16 x 16 bytes: out[j] byte i = in[i] byte j.
inline void TransposeBytes16(__m128i r[16]) {
  __m128i t[16], u[16], w[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // rows 4q..4q+3
    u[4 * q + 0] = _mm_unpacklo_epi16(t[4 * q], t[4 * q + 2]);
    u[4 * q + 1] = _mm_unpackhi_epi16(t[4 * q], t[4 * q + 2]);
    u[4 * q + 2] = _mm_unpacklo_epi16(t[4 * q + 1], t[4 * q + 3]);
    u[4 * q + 3] = _mm_unpackhi_epi16(t[4 * q + 1], t[4 * q + 3]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7
    for (int m = 0; m < 4; ++m) {
      w[8 * h + 2 * m] = _mm_unpacklo_epi32(u[8 * h + m], u[8 * h + 4 + m]);
      w[8 * h + 2 * m + 1] = _mm_unpackhi_epi32(u[8 * h + m], u[8 * h + 4 + m]);
    }
  }
  for (int m = 0; m < 8; ++m) {
    r[2 * m] = _mm_unpacklo_epi64(w[m], w[8 + m]);
    r[2 * m + 1] = _mm_unpackhi_epi64(w[m], w[8 + m]);
  }
}

inline __m512 Flush(__m512 x) {
  return _mm512_mask_and_ps(x, _mm512_fpclass_ps_mask(x, kDenormal), x,
                            _mm512_castsi512_ps(_mm512_set1_epi32(int(0x80000000u))));
}

// Where a run of steps takes its weights. Per k, Prepare() turns the activation (fp32 and
// V100Field) into what the source needs; then for vector v at k offset kk:
//   Fma(t):      fma(a, w, t), the exact product a x w plus t rounded once;
//   Q():         q with a x w = q x Scale(v) exactly (Scale(v) a power of two or 0 per lane);
//   Alignment(): fa + fb up to the per-vector AlignmentShift(v) added after the max (which also
//                takes the fp32 bias 127 off: the result is the field of 2^(ea + eb)).
// From a dequantized panel (vectors `stride` elements apart, kLanes values per k):
struct PanelSource {
  const float* w;
  const int32_t* field;
  int stride;
  struct K {
    __m512 a;
    __m512i fa;
  };
  K Prepare(float a, int32_t fa) const { return K{_mm512_set1_ps(a), _mm512_set1_epi32(fa)}; }
  __m512 W(int v, int kk) const { return _mm512_load_ps(w + v * stride + kk * kLanes); }
  __m512 Fma(int v, int kk, const K& k, __m512 t) const { return _mm512_fmadd_ps(k.a, W(v, kk), t); }
  __m512 Q(int v, int kk, const K& k) const { return _mm512_mul_ps(k.a, W(v, kk)); }
  __m512 Scale(int) const { return _mm512_set1_ps(1.0f); }
  __m512i Alignment(int v, int kk, const K& k) const {
    return _mm512_add_epi32(k.fa, _mm512_load_si512(field + v * stride + kk * kLanes));
  }
  __m512i AlignmentShift(int) const { return _mm512_set1_epi32(-127); }
  __m512i ScaleExponent(int) const { return _mm512_setzero_si512(); }  // Scale() = 2^0
};
// Computed in registers from a plain block's transposed codes (one row: no panel round trip).
// Per k the activation times every E2M1 value (exact: at most 13 significant bits) and fa plus
// every E2M1 field, shared by the vectors; a weight is then one permute, its scale one multiply
// (or the fma's second factor): a x (e2m1 x scale) = (a x e2m1) x scale exactly.
template <int V>
struct CodeSource {
  const __m512i* words[V];  // the block's four transposed code words per vector
  __m512 scale[V];
  __m512i shift[V];           // field shift - 127
  __m512i scale_exponent[V];  // log2(scale) << 23, where scale is a power of two (v100's plain bytes)
  __m512 values;
  __m512i fields;
  struct K {
    __m512 products;
    __m512i alignments;
  };
  K Prepare(float a, int32_t fa) const {
    return K{_mm512_mul_ps(_mm512_set1_ps(a), values), _mm512_add_epi32(_mm512_set1_epi32(fa), fields)};
  }
  __m512i Index(int v, int kk) const { return _mm512_srli_epi32(_mm512_load_si512(words[v] + kk / 8), 4 * (kk % 8)); }
  __m512 Fma(int v, int kk, const K& k, __m512 t) const {
    return _mm512_fmadd_ps(_mm512_permutexvar_ps(Index(v, kk), k.products), scale[v], t);
  }
  __m512 Q(int v, int kk, const K& k) const { return _mm512_permutexvar_ps(Index(v, kk), k.products); }
  __m512 Scale(int v) const { return scale[v]; }
  __m512i Alignment(int v, int kk, const K& k) const { return _mm512_permutexvar_epi32(Index(v, kk), k.alignments); }
  __m512i AlignmentShift(int v) const { return shift[v]; }
  __m512i ScaleExponent(int v) const { return scale_exponent[v]; }
};

// x, flushed to a signed zero where it is subnormal when kFtz (the FTZ model), else as it is.
template <bool kFtz>
inline __m512 FlushIf(__m512 x) {
  if constexpr (kFtz) {
    return Flush(x);
  } else {
    return x;
  }
}

// kSteps steps of one row from k offset 0 of the source; a: fp32 activations. kFtz: every
// partial sum is flushed (kSm90EmulatedFtz), else none is (kSm90Emulated).
template <bool kFtz, int V, int kSteps, class Source>
void StepsSm90(__m512 acc[], const float* a, const Source& source) {
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int s = 0; s < kSteps; ++s) {
    typename Source::K k[4];
    for (int i = 0; i < 4; ++i) k[i] = source.Prepare(a[4 * s + i], 0);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      __m512 t = FlushIf<kFtz>(source.Fma(v, 4 * s, k[0], zero));
      t = FlushIf<kFtz>(source.Fma(v, 4 * s + 1, k[1], t));
      t = FlushIf<kFtz>(source.Fma(v, 4 * s + 2, k[2], t));
      t = FlushIf<kFtz>(source.Fma(v, 4 * s + 3, k[3], t));
      acc[v] = FlushIf<kFtz>(_mm512_add_ps(FlushIf<kFtz>(acc[v]), t));
    }
  }
}

// The V100 step (step_model_v100.cc) per lane, with fields f = max(fp32 exponent field, 113)
// of each fp16 factor (kV100ZeroField for a zero). With P = max(fa + fb) - 127 over the
// products (the fp32 field of 2^(ea + eb)) and X = max(P, c's field), E = X - 127:
// - a term (product or c) truncated onto the grid 2^(E - 23) is trunc(term x 2^(23 - E)): the
//   multiply by a power of two is exact (a result below 1 may round but truncates to 0), and
//   |term| < 2^(E + 2) keeps it below 2^25; a product is taken as q x (scale x 2^(23 - E)),
//   the second factor a normal power of two (or 0, where every product is zero);
// - the five terms sum exactly in int32 (below 2^28);
// - the sum truncated to fp32 is its round-toward-zero conversion times 2^(E - 23) (exact, at
//   least 2^-51; at or above 2^128 it is Inf, as in the model).
// c is subnormal or zero only with a smaller field than any nonzero product, so it neither sets
// E nor survives the truncation, as in the model. Two kinds of lanes take
// c + (((q0 + q1) + (q2 + q3)) x scale + 0) in fp32 instead: lanes whose products are all zero
// (the model returns c, -0 as +0: exactly c + 0), and lanes with Inf or NaN among c and the
// products (only computed where a lane needs it: `inputs_special` says the step's activations
// or weights may hold Inf or NaN) (the model's rules are IEEE's for one sum: NaN operand or Inf x 0 makes a NaN, Infs
// of both signs give NaN, otherwise an Inf wins; finite terms cannot overflow: |c| <= FLT_MAX,
// |q| < 2^19 and scale <= 2^15 on the in-register route, scale 1 from the panel).
template <int V, int kSteps, class Source>
void StepsV100(__m512 acc[], const float* a, const int32_t* a_field, const Source& source, bool inputs_special) {
  const __m512i exponent_mask = _mm512_set1_epi32(0x7F800000);
  const __m512i down_base = _mm512_set1_epi32(277 << 23);  // 2^(23 - E) = field 277 - X
  const __m512i up_base = _mm512_set1_epi32(23 << 23);     // 2^(E - 23) = field X - 23
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int s = 0; s < kSteps; ++s) {
    typename Source::K k[4];
    for (int i = 0; i < 4; ++i) k[i] = source.Prepare(a[4 * s + i], a_field[4 * s + i]);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      __m512 q[4];
      __m512i largest = source.Alignment(v, 4 * s, k[0]);
      q[0] = source.Q(v, 4 * s, k[0]);
      for (int i = 1; i < 4; ++i) {
        q[i] = source.Q(v, 4 * s + i, k[i]);
        largest = _mm512_max_epi32(largest, source.Alignment(v, 4 * s + i, k[i]));
      }
      const __m512i product_field = _mm512_add_epi32(largest, source.AlignmentShift(v));
      const __mmask16 all_zero = _mm512_cmplt_epi32_mask(product_field, _mm512_setzero_si512());
      const __m512i product_exponent = _mm512_slli_epi32(product_field, 23);
      const __m512 scale = source.Scale(v);
      const __m512 c = acc[v];
      const __m512i x =
          _mm512_max_epi32(product_exponent, _mm512_and_si512(_mm512_castps_si512(c), exponent_mask));
      const __m512 down = _mm512_castsi512_ps(_mm512_sub_epi32(down_base, x));
      const __m512 up = _mm512_castsi512_ps(_mm512_sub_epi32(x, up_base));
      // scale x 2^(23 - E) by its exponent field (scale a normal power of two on both routes
      // for v100): one integer add instead of a multiply on the accumulator's path.
      const __m512 product_down = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(down), source.ScaleExponent(v)));
      const __m512i t01 = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_mul_ps(q[0], product_down)),
                                           _mm512_cvttps_epi32(_mm512_mul_ps(q[1], product_down)));
      const __m512i t23 = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_mul_ps(q[2], product_down)),
                                           _mm512_cvttps_epi32(_mm512_mul_ps(q[3], product_down)));
      const __m512i sum =
          _mm512_add_epi32(_mm512_add_epi32(t01, t23), _mm512_cvttps_epi32(_mm512_mul_ps(c, down)));
      acc[v] = _mm512_mul_ps(_mm512_cvt_roundepi32_ps(sum, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), up);
      // Without Inf or NaN among the inputs and c, and with a nonzero product in every lane, no
      // lane takes the plain sum.
      if (inputs_special || (all_zero | _mm512_fpclass_ps_mask(c, kInfOrNan)) != 0) {
        const __m512 products = _mm512_add_ps(
            _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(q[0], q[1]), _mm512_add_ps(q[2], q[3])), scale), zero);
        const __m512 plain_sum = _mm512_add_ps(c, products);
        const __mmask16 slow = all_zero | _mm512_fpclass_ps_mask(plain_sum, kInfOrNan);
        acc[v] = _mm512_mask_mov_ps(acc[v], slow, plain_sum);
      }
    }
  }
}

template <StepModel kModel, int V, int kSteps, class Source>
void RunSteps(__m512 acc[], const float* a, const int32_t* a_field, const Source& source, bool inputs_special) {
  if constexpr (kModel == StepModel::kSm90Emulated) StepsSm90<false, V, kSteps>(acc, a, source);
  if constexpr (kModel == StepModel::kSm90EmulatedFtz) StepsSm90<true, V, kSteps>(acc, a, source);
  if constexpr (kModel == StepModel::kV100) StepsV100<V, kSteps>(acc, a, a_field, source, inputs_special);
}

template <StepModel kModel>
__m512 ReduceLanes(__m512 sum, __m512 partial) {
  if constexpr (kModel == StepModel::kSm90EmulatedFtz) {
    return Flush(_mm512_add_ps(Flush(sum), Flush(partial)));
  } else {
    return _mm512_add_ps(sum, partial);
  }
}

// The helpers of RunBlock below are force-inlined: they are its body, cut into its stages.

// Where each of the 32 columns of a work item reads its codes and scale bytes: a column past N
// reads a zero code row that does not advance (stride 0) and no scale row (nullptr).
struct ColumnRows {
  const uint8_t* codes[kVectors][kLanes];
  int code_stride[kVectors][kLanes];
  const uint8_t* scales[kVectors * kLanes];
};
[[gnu::always_inline]] inline ColumnRows LocateColumns(const FastInputs& in, int group, int n0, int columns) {
  const int blocks = in.k / kBlockK;
  ColumnRows rows;
  for (int c = 0; c < kVectors * kLanes; ++c) {
    const bool live = c < columns;
    const size_t column = size_t(group) * size_t(in.n) + size_t(n0 + c);
    rows.codes[c / kLanes][c % kLanes] = live ? in.packed_codes + column * size_t(in.k / 2) : kZeroCodes;
    rows.code_stride[c / kLanes][c % kLanes] = live ? 16 : 0;
    rows.scales[c] = live ? in.scale_bytes + column * size_t(blocks) : nullptr;
  }
  return rows;
}

// The scale bytes k-major: scales[block * 32 + column]; columns past N get a plain byte (their
// codes are zero). Sixteen blocks at a time by a byte transpose, the rest one by one.
[[gnu::always_inline]] inline void GatherScalesKMajor(const ColumnRows& rows, int blocks, uint8_t* scales) {
  alignas(16) static constexpr uint8_t kPlainBytes[16] = {127, 127, 127, 127, 127, 127, 127, 127,
                                                          127, 127, 127, 127, 127, 127, 127, 127};
  int b0 = 0;
  for (; b0 + 16 <= blocks; b0 += 16) {
    for (int v = 0; v < kVectors; ++v) {
      __m128i r[16];
      for (int lane = 0; lane < kLanes; ++lane) {
        const uint8_t* row = rows.scales[v * kLanes + lane];
        r[lane] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row != nullptr ? row + b0 : kPlainBytes));
      }
      TransposeBytes16(r);
      for (int j = 0; j < 16; ++j)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(scales + size_t(b0 + j) * 32 + v * kLanes), r[j]);
    }
  }
  for (int c = 0; c < kVectors * kLanes; ++c) {
    for (int b = b0; b < blocks; ++b) scales[size_t(b) * 32 + c] = rows.scales[c] != nullptr ? rows.scales[c][b] : 127;
  }
}

// The transposed codes of blocks b .. b + 3 (fewer at the end) of every vector: words[v][block % 4].
// Codes are read four blocks at a time, a 64-byte line per column: each line is used whole as
// soon as it arrives (16 rows K/2 bytes apart share few L1 sets, so lines do not stay there);
// lines further ahead are prefetched into L2.
[[gnu::always_inline]] inline void LoadCodeWords(const ColumnRows& rows, int b, int blocks,
                                                 __m512i words[kVectors][4][4]) {
  for (int v = 0; v < kVectors; ++v) {
    const uint8_t* block_rows[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      block_rows[lane] = rows.codes[v][lane] + size_t(rows.code_stride[v][lane]) * size_t(b);
      if (rows.code_stride[v][lane] != 0 && b + 16 < blocks)
        _mm_prefetch(reinterpret_cast<const char*>(block_rows[lane]) + 256, _MM_HINT_T1);
    }
    if (b + 4 <= blocks) {
      TransposeCodes4(block_rows, 0, words[v]);
    } else {
      for (int bb = b; bb < blocks; ++bb) TransposeCodes(block_rows, 16 * (bb - b), words[v][bb - b]);
    }
  }
}

// Makes a block's weights (codes words[v][slot]) available and says where: one row with plain
// scales computes the weights where it uses them (true: `codes` is set up); otherwise the block
// is dequantized once into the panel for every row (false).
template <StepModel kModel>
[[gnu::always_inline]] inline bool PrepareBlockWeights(const FastInputs& in, int rows, const uint8_t* block_scale_bytes,
                                                       const __m512i words[kVectors][4][4], int slot,
                                                       CodeSource<kVectors>& codes, Panel& panel) {
  constexpr bool kFields = kModel == StepModel::kV100;
  BlockScales block_scales[kVectors];
  bool plain = true;
  for (int v = 0; v < kVectors; ++v) {
    block_scales[v] = ReadScales<kFields>(*in.wide, block_scale_bytes + v * kLanes);
    plain &= block_scales[v].plain;
  }
  const bool in_registers = rows == 1 && plain;
  for (int v = 0; v < kVectors; ++v) {
    if (in_registers) {
      codes.scale[v] = block_scales[v].scale;
      codes.shift[v] = _mm512_sub_epi32(block_scales[v].shift, _mm512_set1_epi32(127));
      codes.scale_exponent[v] = _mm512_slli_epi32(block_scales[v].shift, 23);
    } else {
      DequantizeBlock<kFields>(in, words[v][slot], block_scales[v], v, panel);
    }
  }
  return in_registers;
}

// Whether any of the 32 activation fields of a block is 255 (Inf or NaN).
[[gnu::always_inline]] inline bool AnyInfOrNanField(const int32_t* a_field) {
  const __m512i inf_or_nan = _mm512_set1_epi32(255);
  return (_mm512_cmpeq_epi32_mask(_mm512_loadu_si512(a_field), inf_or_nan) |
          _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(a_field + 16), inf_or_nan)) != 0;
}

// One row's steps over block k0 .. k0 + 31. row_state holds per vector the running split's
// accumulator then the reduction of the completed splits; new_split: split - 1 completed at k0.
template <StepModel kModel>
[[gnu::always_inline]] inline void RunRowBlock(const FastInputs& in, size_t row_offset, float* row_state,
                                               bool new_split, int split, bool in_registers,
                                               const CodeSource<kVectors>& codes, const PanelSource& from_panel) {
  constexpr bool kFields = kModel == StepModel::kV100;
  __m512 acc[kVectors];
  for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_loadu_ps(row_state + v * 2 * kLanes);
  if (new_split) {  // split - 1 is complete: reduce it, start from +0
    for (int v = 0; v < kVectors; ++v) {
      float* reduced = row_state + v * 2 * kLanes + kLanes;
      _mm512_storeu_ps(reduced, split == 1 ? acc[v] : ReduceLanes<kModel>(_mm512_loadu_ps(reduced), acc[v]));
      acc[v] = _mm512_setzero_ps();
    }
  }
  const float* a = in.activation_f32 + row_offset;
  const int32_t* a_field = kFields ? in.activation_v100_field + row_offset : nullptr;
  if (in_registers) {
    // Plain blocks hold finite weights: only an Inf or NaN activation (field 255) is special.
    bool special = false;
    if constexpr (kFields) special = AnyInfOrNanField(a_field);
    RunSteps<kModel, kVectors, kBlockSteps>(acc, a, a_field, codes, special);
  } else {
    RunSteps<kModel, kVectors, kBlockSteps>(acc, a, a_field, from_panel, true);
  }
  for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(row_state + v * 2 * kLanes, acc[v]);
}

// Reduces each row's last split into the others and stores the live columns, NaN canonical.
template <StepModel kModel>
[[gnu::always_inline]] inline void StoreRows(const FastInputs& in, int row_begin, int rows, int n0, int columns,
                                             const float* state, uint32_t* output) {
  const __m512 canonical_nan = _mm512_castsi512_ps(_mm512_set1_epi32(int(kF32CanonicalNaN)));
  for (int row = 0; row < rows; ++row) {
    const float* row_state = state + size_t(row) * kVectors * 2 * kLanes;
    uint32_t* destination = output + size_t(row_begin + row) * size_t(in.n) + size_t(n0);
    for (int v = 0; v < kVectors && v * kLanes < columns; ++v) {
      const __m512 acc = _mm512_loadu_ps(row_state + v * 2 * kLanes);
      __m512 result =
          in.split_count == 1 ? acc : ReduceLanes<kModel>(_mm512_loadu_ps(row_state + v * 2 * kLanes + kLanes), acc);
      result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(result, result, _CMP_UNORD_Q), canonical_nan);
      const int live = columns - v * kLanes < kLanes ? columns - v * kLanes : kLanes;
      _mm512_mask_storeu_epi32(destination + v * kLanes, __mmask16((1u << live) - 1), _mm512_castps_si512(result));
    }
  }
}

template <StepModel kModel>
void RunBlock(const FastInputs& in, int group, int n0, const WideScratch& scratch, uint32_t* output) {
  const int k = in.k;
  const int blocks = k / kBlockK;
  const int columns = in.n - n0 < kVectors * kLanes ? in.n - n0 : kVectors * kLanes;
  const int row_begin = in.row_offsets[group];
  const int rows = in.row_offsets[group + 1] - row_begin;
  Panel& panel = *static_cast<Panel*>(scratch.panel);

  const ColumnRows column_rows = LocateColumns(in, group, n0, columns);
  GatherScalesKMajor(column_rows, blocks, scratch.scales);
  for (int i = 0; i < rows * kVectors * 2 * kLanes; ++i) scratch.state[i] = 0.0f;

  CodeSource<kVectors> codes;
  codes.values = _mm512_load_ps(kE2m1.value);
  codes.fields = _mm512_load_si512(kE2m1.field);
  const PanelSource from_panel{&panel.w[0][0][0], &panel.field[0][0][0], kBlockK * kLanes};
  alignas(64) __m512i words[kVectors][4][4];  // [v][block % 4][d]
  int split = 0;
  for (int b = 0; b < blocks; ++b) {
    const int k0 = b * kBlockK;
    if (b % 4 == 0) LoadCodeWords(column_rows, b, blocks, words);
    for (int v = 0; v < kVectors; ++v) codes.words[v] = words[v][b % 4];
    const bool in_registers =
        PrepareBlockWeights<kModel>(in, rows, scratch.scales + size_t(b) * 32, words, b % 4, codes, panel);
    // Split boundaries are multiples of lcm(32, cta_k): a block never straddles one.
    const bool new_split = split + 1 < in.split_count && in.splits[split + 1].begin == k0;
    if (new_split) ++split;
    for (int row = 0; row < rows; ++row) {
      const size_t row_offset = size_t(row_begin + row) * size_t(k) + size_t(k0);
      float* row_state = scratch.state + size_t(row) * kVectors * 2 * kLanes;
      RunRowBlock<kModel>(in, row_offset, row_state, new_split, split, in_registers, codes, from_panel);
    }
  }
  StoreRows<kModel>(in, row_begin, rows, n0, columns, scratch.state, output);
}

}  // namespace

void RunWideColumnBlock(const FastInputs& inputs, int group, int n0, const WideScratch& scratch, uint32_t* output) {
  switch (inputs.model) {
    case StepModel::kV100:
      return RunBlock<StepModel::kV100>(inputs, group, n0, scratch, output);
    case StepModel::kSm90Emulated:
      return RunBlock<StepModel::kSm90Emulated>(inputs, group, n0, scratch, output);
    case StepModel::kSm90EmulatedFtz:
      return RunBlock<StepModel::kSm90EmulatedFtz>(inputs, group, n0, scratch, output);
    case StepModel::kExact:
      break;  // not a wide-path model: the caller runs it on the AVX2 path
  }
}

bool RunWideStepLanes(StepModel model, const uint32_t c[16], const uint16_t a[4], const uint16_t b[4][16],
                      uint32_t d[16]) {
  alignas(64) float w[4][kLanes];
  alignas(64) int32_t field[4][kLanes];
  float a_f32[4];
  int32_t a_field[4];
  for (int i = 0; i < 4; ++i) {
    for (int lane = 0; lane < kLanes; ++lane) {
      w[i][lane] = f16_to_f32(b[i][lane]);
      field[i][lane] = V100Field(b[i][lane]);
    }
    a_f32[i] = f16_to_f32(a[i]);
    a_field[i] = V100Field(a[i]);
  }
  const PanelSource source{&w[0][0], &field[0][0], 0};
  __m512 acc[1] = {_mm512_loadu_ps(reinterpret_cast<const float*>(c))};
  switch (model) {
    case StepModel::kV100:
      RunSteps<StepModel::kV100, 1, 1>(acc, a_f32, a_field, source, true);
      break;
    case StepModel::kSm90Emulated:
      RunSteps<StepModel::kSm90Emulated, 1, 1>(acc, a_f32, a_field, source, true);
      break;
    case StepModel::kSm90EmulatedFtz:
      RunSteps<StepModel::kSm90EmulatedFtz, 1, 1>(acc, a_f32, a_field, source, true);
      break;
    case StepModel::kExact:
      return false;
  }
  _mm512_storeu_ps(reinterpret_cast<float*>(d), acc[0]);
  return true;
}

}  // namespace mxdiff::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
