#include "reference/problem.h"

#include "absl/status/status.h"
#include "fmt/core.h"
#include "reference/status_macros.h"

namespace mxdiff {

std::string TacticName(const Tactic& tactic) {
  return fmt::format("{}x{}x{}/s{}/w{}", tactic.cta_m, tactic.cta_n, tactic.cta_k, tactic.splits,
                     tactic.swizzle);
}

absl::Status ValidateProblem(const GroupedProblem& problem) {
  if (problem.groups < 1) {
    return absl::InvalidArgumentError(fmt::format("groups must be >= 1, got {}", problem.groups));
  }
  if (problem.n < 1) return absl::InvalidArgumentError(fmt::format("N must be >= 1, got {}", problem.n));
  if (problem.k < kBlockK || problem.k % kBlockK != 0) {
    return absl::InvalidArgumentError(
        fmt::format("K must be a positive multiple of {}, got {}", kBlockK, problem.k));
  }
  if (problem.row_offsets.size() != size_t(problem.groups) + 1) {
    return absl::InvalidArgumentError(fmt::format("row_offsets has {} entries, {} groups need {}",
                                                  problem.row_offsets.size(), problem.groups,
                                                  problem.groups + 1));
  }
  if (problem.row_offsets[0] != 0) {
    return absl::InvalidArgumentError(fmt::format("row_offsets[0] must be 0, got {}", problem.row_offsets[0]));
  }
  for (int g = 0; g < problem.groups; ++g) {
    if (problem.row_offsets[g + 1] < problem.row_offsets[g]) {
      return absl::InvalidArgumentError(fmt::format("row_offsets must ascend: [{}] = {} < [{}] = {}", g + 1,
                                                    problem.row_offsets[g + 1], g, problem.row_offsets[g]));
    }
  }
  const auto expect_size = [](std::string_view what, size_t have, size_t want) -> absl::Status {
    if (have == want) return absl::OkStatus();
    return absl::InvalidArgumentError(fmt::format("{} has {} elements, the shape needs {}", what, have, want));
  };
  const size_t groups = size_t(problem.groups);
  MXDIFF_RETURN_IF_ERROR(expect_size("activations", problem.activations.size(),
                                     size_t(problem.rows()) * size_t(problem.k)));
  MXDIFF_RETURN_IF_ERROR(expect_size("packed_codes", problem.packed_codes.size(), groups * problem.codes_per_group()));
  return expect_size("scale_bytes", problem.scale_bytes.size(), groups * problem.scales_per_group());
}

absl::Status ValidateTactic(const Tactic& tactic) {
  if (tactic.cta_m < 1 || tactic.cta_n < 1) {
    return absl::InvalidArgumentError(fmt::format("tactic {}: CTA M and N must be >= 1", TacticName(tactic)));
  }
  if (tactic.cta_k < 4 || tactic.cta_k > kMaxCtaK || tactic.cta_k % 4 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("tactic {}: CTA K must be a multiple of 4 in [4, {}]", TacticName(tactic), kMaxCtaK));
  }
  if (tactic.splits < 1 || tactic.splits > kMaxSplits) {
    return absl::InvalidArgumentError(
        fmt::format("tactic {}: splits must be in [1, {}]", TacticName(tactic), kMaxSplits));
  }
  if (tactic.swizzle < 0 || tactic.swizzle > kMaxSwizzleField) {
    return absl::InvalidArgumentError(
        fmt::format("tactic {}: swizzle must be in [0, {}]", TacticName(tactic), kMaxSwizzleField));
  }
  return absl::OkStatus();
}

}  // namespace mxdiff
