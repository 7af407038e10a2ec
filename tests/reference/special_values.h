// Random fp16/fp32 values weighted toward the cases oracles treat apart (zeros of both signs,
// subnormals, Inf, NaN, extremes), and random problems dense in them.
#pragma once

#include <cstdint>
#include <iterator>
#include <random>

#include "reference/fp16.h"
#include "tests/reference/gemm_test_problems.h"

namespace mxdiff::testing {

inline uint16_t SpecialF16(std::mt19937_64& rng) {
  const uint16_t sign = uint16_t(rng() & 0x8000);
  switch (rng() % 16) {
    case 0:
      return sign;  // +-0
    case 1:
      return uint16_t(sign | (1 + rng() % 0x3FF));  // subnormal
    case 2:
      return uint16_t(sign | 0x7C00);  // Inf
    case 3:
      return uint16_t(0x7C00 | sign | (1 + rng() % 0x3FF));  // NaN
    case 4:  // the table of special values (+-65504, the smallest normal, +-1, ... among them)
      return kF16SpecialValues[rng() % std::size(kF16SpecialValues)];
    case 5:
      return uint16_t(sign | 0x0400 | (rng() & 0x3FF));  // smallest normal binade
    default:
      return uint16_t(sign | ((1 + rng() % 30) << 10) | (rng() & 0x3FF));
  }
}

inline uint32_t SpecialF32(std::mt19937_64& rng) {
  const uint32_t sign = uint32_t(rng() & 0x80000000u);
  switch (rng() % 10) {
    case 0:
      return sign;
    case 1:
      return sign | uint32_t(1 + rng() % 0x7FFFFF);  // subnormal
    case 2:
      return sign | 0x7F800000u;
    case 3:
      return sign | 0x7F800000u | uint32_t(1 + rng() % 0x7FFFFF);
    case 4:
      return sign | 0x7F7FFFFFu;  // FLT_MAX
    default:  // the products' range, where alignment and cancellation matter
      return sign | uint32_t(rng() & 0x7FFFFF) | uint32_t(80 + rng() % 90) << 23;
  }
}

// A problem dense in special values: activations from SpecialF16 (every one where
// dense_specials, else one in 64) and scale bytes from the checkpoint's range with any byte
// mixed in (one in 4 where dense_specials, else one in 200; 0xFF included).
inline OwnedProblem SpecialProblem(std::mt19937_64& rng, int groups, int n, int k, int max_rows,
                                   bool dense_specials) {
  OwnedProblem p = RandomProblem(rng, groups, n, k, max_rows, Values::kModerate);
  for (uint16_t& a : p.activations) {
    if (dense_specials || rng() % 64 == 0) a = SpecialF16(rng);
  }
  for (uint8_t& raw : p.scale_bytes) {
    if (dense_specials ? rng() % 4 == 0 : rng() % 200 == 0) raw = uint8_t(rng());
  }
  return p;
}

}  // namespace mxdiff::testing
