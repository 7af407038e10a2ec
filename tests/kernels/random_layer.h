// Random grouped problems for the kernel tests and the benchmark (test support, not library code).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "reference/problem.h"
#include "tests/reference/test_seed.h"  // TestSeed(what): the kernel tests' seeds

namespace mxdiff::testing {

enum class ScaleBytes {
  kAdmitted,  // uniform over ScaleClassRange(ScaleClass::kAdmitted): folded equals ordinary
  kWide,      // mostly raw 100..140 (flushed, admitted and large blocks), 1 in 32 any byte 0..255
};

struct RandomLayer {
  int groups = 0;
  int n = 0;
  int k = 0;
  std::vector<int32_t> row_offsets;
  std::vector<uint16_t> activations;
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;

  int rows() const { return row_offsets.back(); }
  GroupedProblem problem() const;
};

// `special_rate`: share of activations drawn from ±0, ±Inf, NaN, subnormals and the largest
// finite values instead of moderate normals (magnitudes 2^-6..2^4).
RandomLayer MakeRandomLayer(std::mt19937_64& rng, int n, int k, std::span<const int> rows_per_group,
                            ScaleBytes scale_bytes, double special_rate = 0.0);

// "" when equal, else the count and the first few differing elements.
std::string DescribeMismatch(std::span<const uint16_t> expected, std::span<const uint16_t> got, int n);

// Distinct values in `bits`: tests assert this is large so that a constant output cannot pass.
size_t DistinctValues(std::span<const uint16_t> bits);

}  // namespace mxdiff::testing
