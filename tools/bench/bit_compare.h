// Bit-for-bit comparison of two arms' outputs (rows x n fp16 bits). CUDA-free.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kernels/output_poison.h"

namespace mxdiff::bench {

// "" when every element of `output` was written (none is kRunnerOutputPoison, the poison every
// arm's output is filled with before a run: kernels/output_poison.h), else how many were not
// and where the first one is.
std::string DescribeUnwritten(std::span<const uint16_t> output, int n);

// "" when `a` and `b` hold identical bits, else the count of differing elements and the first
// few with their row, column and both values.
std::string DescribeBitDifference(std::span<const uint16_t> a, std::span<const uint16_t> b, int n);

}  // namespace mxdiff::bench
