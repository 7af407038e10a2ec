// Random grouped problems for the reference GEMM tests and benchmark: owned storage plus the
// GroupedProblem view of it.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "reference/checkpoint_scales.h"
#include "reference/problem.h"

namespace mxdiff::testing {

struct OwnedProblem {
  int groups = 0, n = 0, k = 0;
  std::vector<int32_t> row_offsets;
  std::vector<uint16_t> activations;
  std::vector<uint8_t> packed_codes;
  std::vector<uint8_t> scale_bytes;

  GroupedProblem View() const {
    return GroupedProblem{groups, n, k, row_offsets, activations, packed_codes, scale_bytes};
  }
};

enum class Values : uint8_t {
  kModerate,  // normal fp16 activations in [2^-6, 2^6), the checkpoint's scale bytes (CheckpointScaleOf)
  kWild,      // any activation bits (subnormals, Inf, NaN at low density) and any scale byte
};

inline OwnedProblem RandomProblem(std::mt19937_64& rng, int groups, int n, int k, int max_rows_per_group,
                                  Values values) {
  OwnedProblem p;
  p.groups = groups;
  p.n = n;
  p.k = k;
  p.row_offsets.push_back(0);
  for (int g = 0; g < groups; ++g) {
    p.row_offsets.push_back(p.row_offsets.back() + int(rng() % (max_rows_per_group + 1)));
  }
  if (p.row_offsets.back() == 0) p.row_offsets.back() = 1;  // never a vacuous problem: the last group gets a row
  const size_t rows = size_t(p.row_offsets.back());
  p.activations.resize(rows * size_t(k));
  for (uint16_t& a : p.activations) {
    if (values == Values::kModerate) {
      a = uint16_t((rng() & 0x8000) | ((9 + rng() % 12) << 10) | (rng() & 0x3FF));
    } else {
      const uint64_t pick = rng() % 1000;
      a = pick < 2 ? uint16_t(0x7C00 | (rng() & 0x8000) | (pick == 0 ? (rng() & 0x3FF) : 0))  // Inf, NaN
                   : uint16_t(rng() % 0x7C00 | (rng() & 0x8000));
    }
  }
  p.packed_codes.resize(size_t(groups) * size_t(n) * size_t(k) / 2);
  for (uint8_t& byte : p.packed_codes) byte = uint8_t(rng());
  p.scale_bytes.resize(size_t(groups) * size_t(n) * size_t(k) / 32);
  for (uint8_t& raw : p.scale_bytes) {
    if (values == Values::kModerate) {
      raw = CheckpointScaleOf(rng());
    } else {  // mostly near the admitted range, every fifth byte anything (0xFF included)
      raw = rng() % 5 == 0 ? uint8_t(rng()) : uint8_t(100 + rng() % 36);
    }
  }
  return p;
}

}  // namespace mxdiff::testing
