// The grouped (MoE) decode GEMM problem as plain data, the contract between the reference,
// the kernels, the fuzzers and the tools. Views only: the caller owns the memory.
//
//   activations  fp16 bits, M x K row-major, M = row_offsets[groups]
//   row_offsets  groups + 1 ascending entries, row_offsets[0] = 0; group g owns rows
//                [row_offsets[g], row_offsets[g + 1]) (a group may own no rows)
//   packed_codes per group N x K/2 bytes row-major (weight row n, low nibble = even k)
//   scale_bytes  per group N x K/32 UE8M0 bytes row-major
//   output       fp16 bits, M x N row-major: out[m][n] = sum_k act[m][k] * w_g[n][k]
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "reference/tactic_limits.h"
#include "reference/transform.h"

namespace mxdiff {

struct Tactic {
  int cta_m = 16;
  int cta_n = 128;
  int cta_k = 32;
  int splits = 1;   // requested; see split_plan.h for the clamp
  int swizzle = 0;  // raster swizzle log2; never changes bits

  friend bool operator==(const Tactic&, const Tactic&) = default;
};

// "16x128x32/s5/w0"
std::string TacticName(const Tactic& tactic);

struct GroupedProblem {
  int groups = 0;
  int n = 0;
  int k = 0;
  std::span<const int32_t> row_offsets;
  std::span<const uint16_t> activations;
  std::span<const uint8_t> packed_codes;
  std::span<const uint8_t> scale_bytes;

  int rows() const { return groups > 0 && !row_offsets.empty() ? row_offsets[groups] : 0; }
  size_t codes_per_group() const { return size_t(n) * size_t(k) / 2; }
  size_t scales_per_group() const { return size_t(n) * size_t(k) / kBlockK; }
};

// Shape and span-size checks shared by every consumer: K a positive multiple of 32, N >= 1,
// ascending offsets starting at 0, every span exactly the size the shape implies.
absl::Status ValidateProblem(const GroupedProblem& problem);
// Sizes positive, cta_k a multiple of 4 up to kMaxCtaK (the reference accepts any such tactic;
// which ones a kernel instantiates is the kernel registry's business), splits and swizzle
// within tactic_limits.h.
absl::Status ValidateTactic(const Tactic& tactic);

}  // namespace mxdiff
