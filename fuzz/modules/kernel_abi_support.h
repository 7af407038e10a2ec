// For a kernel written in C++ behind the C ABI of mxdiff_kernel_abi.h (the example kernel, the
// CLI test's kernel, a user's wrapper): the descriptor as the reference's GroupedProblem, and
// the ABI's way of returning a status with a message.
#pragma once

#include <algorithm>
#include <cstring>
#include <span>
#include <string_view>

#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "reference/problem.h"

namespace mxdiff::fuzz {

// Views of the descriptor's buffers, sized by its shape (groups, n, k > 0 and row_offsets
// non-null, checked by the caller).
inline GroupedProblem ProblemOf(const mxdiff_problem& p) {
  const size_t groups = size_t(p.groups), n = size_t(p.n), k = size_t(p.k);
  const size_t rows = size_t(p.row_offsets[p.groups]);
  GroupedProblem problem;
  problem.groups = p.groups;
  problem.n = p.n;
  problem.k = p.k;
  problem.row_offsets = std::span<const int32_t>(p.row_offsets, groups + 1);
  problem.activations = std::span<const uint16_t>(p.activations, rows * k);
  problem.packed_codes = std::span<const uint8_t>(p.packed_codes, groups * n * k / 2);
  problem.scale_bytes = std::span<const uint8_t>(p.scale_bytes, groups * n * k / kBlockK);
  return problem;
}

// Copies `text` into the caller's message buffer (truncated, always terminated); returns `code`.
inline int Fail(int code, char* message, size_t message_size, std::string_view text) {
  if (message_size > 0) {
    const size_t length = std::min(text.size(), message_size - 1);
    std::memcpy(message, text.data(), length);
    message[length] = '\0';
  }
  return code;
}

}  // namespace mxdiff::fuzz
