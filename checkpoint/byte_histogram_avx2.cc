// The AVX2 path of CountBytes. Scale bytes of a checkpoint span a narrow range (the seed's
// DeepSeek V4-Flash audit: raw 114..126), so each block of 8160 bytes is first reduced to its
// minimum and maximum; a block spanning at most 16 values is then counted by comparing every
// 32-byte vector against each value (one compare and one subtract per value, 8-bit counters
// summed per block), any other block by the scalar tables. Only this file is compiled for AVX2
// (the pragmas below), and it is entered only after CountBytesAvx2Supported().
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "checkpoint/byte_histogram.h"

namespace mxdiff::checkpoint::internal {

bool CountBytesAvx2Supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return supported;
}

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif

namespace {

constexpr size_t kVector = 32;
constexpr size_t kBlockVectors = 255;  // an 8-bit counter takes 255 matches

// Eight tables, so that a run of equal bytes does not wait on one counter's store each time;
// 32-bit counters (a piece is at most kPieceBytes), zeroed only once a block needs them.
struct ScalarTables {
  static constexpr int kTables = 8;
  bool used = false;
  uint32_t counts[kTables][256];

  void Add(const uint8_t* bytes, size_t size) {
    if (size == 0) return;
    if (!used) {
      std::memset(counts, 0, sizeof counts);
      used = true;
    }
    size_t i = 0;
    for (; i + kTables <= size; i += kTables) {
      uint64_t word;
      std::memcpy(&word, bytes + i, sizeof word);
      for (int t = 0; t < kTables; ++t) ++counts[t][(word >> (8 * t)) & 0xFF];
    }
    for (; i < size; ++i) ++counts[0][bytes[i]];
  }
  void AddTo(uint64_t* histogram) const {
    if (!used) return;
    for (int raw = 0; raw < 256; ++raw) {
      uint64_t sum = 0;
      for (int t = 0; t < kTables; ++t) sum += counts[t][raw];
      histogram[raw] += sum;
    }
  }
};
constexpr size_t kPieceBytes = size_t(1) << 30;

uint8_t HorizontalMin(__m256i v) {
  __m128i x = _mm_min_epu8(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  x = _mm_min_epu8(x, _mm_srli_si128(x, 8));
  x = _mm_min_epu8(x, _mm_srli_si128(x, 4));
  x = _mm_min_epu8(x, _mm_srli_si128(x, 2));
  x = _mm_min_epu8(x, _mm_srli_si128(x, 1));
  return uint8_t(_mm_cvtsi128_si32(x));
}

uint8_t HorizontalMax(__m256i v) {
  __m128i x = _mm_max_epu8(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  x = _mm_max_epu8(x, _mm_srli_si128(x, 8));
  x = _mm_max_epu8(x, _mm_srli_si128(x, 4));
  x = _mm_max_epu8(x, _mm_srli_si128(x, 2));
  x = _mm_max_epu8(x, _mm_srli_si128(x, 1));
  return uint8_t(_mm_cvtsi128_si32(x));
}

// Counts the values lo .. lo + 7 (those <= 255) in `vectors` vectors; counts of other values are
// not touched, so the caller must know the block holds no value it does not count.
void CountEight(const uint8_t* block, size_t vectors, int lo, uint64_t* histogram) {
  __m256i acc[8];
  __m256i value[8];
  for (int j = 0; j < 8; ++j) {
    acc[j] = _mm256_setzero_si256();
    value[j] = _mm256_set1_epi8(char(uint8_t(lo + j)));
  }
  for (size_t v = 0; v < vectors; ++v) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + v * kVector));
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_sub_epi8(acc[j], _mm256_cmpeq_epi8(x, value[j]));
  }
  for (int j = 0; j < 8 && lo + j <= 255; ++j) {
    const __m256i sums = _mm256_sad_epu8(acc[j], _mm256_setzero_si256());  // four 64-bit lane sums
    const __m128i half = _mm_add_epi64(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    histogram[lo + j] += uint64_t(_mm_cvtsi128_si64(half)) + uint64_t(_mm_extract_epi64(half, 1));
  }
}

void CountPiece(const uint8_t* bytes, size_t size, uint64_t* histogram) {
  ScalarTables scalar;
  size_t i = 0;
  while (size - i >= kVector) {
    const size_t whole = (size - i) / kVector;
    const size_t vectors = whole < kBlockVectors ? whole : kBlockVectors;
    const uint8_t* block = bytes + i;
    __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block));
    __m256i hi = lo;
    for (size_t v = 1; v < vectors; ++v) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + v * kVector));
      lo = _mm256_min_epu8(lo, x);
      hi = _mm256_max_epu8(hi, x);
    }
    const int min = HorizontalMin(lo), max = HorizontalMax(hi);
    if (max - min < 8) {
      CountEight(block, vectors, min, histogram);
    } else if (max - min < 16) {
      CountEight(block, vectors, min, histogram);
      CountEight(block, vectors, min + 8, histogram);
    } else {
      scalar.Add(block, vectors * kVector);
    }
    i += vectors * kVector;
  }
  scalar.Add(bytes + i, size - i);
  scalar.AddTo(histogram);
}

}  // namespace

void CountBytesAvx2(const uint8_t* bytes, size_t size, uint64_t* histogram) {
  for (size_t start = 0; start < size; start += kPieceBytes) {
    CountPiece(bytes + start, size - start < kPieceBytes ? size - start : kPieceBytes, histogram);
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

}  // namespace mxdiff::checkpoint::internal
