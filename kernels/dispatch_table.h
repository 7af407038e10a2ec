// The default ordinary tactic for a shape: an explicit table for the shapes that matter
// (DeepSeek V4 decode, docs/numerics.md: shapes), a rule for the rest. Host-only; the folded variant never
// consults this: it runs whatever ordinary tactic was chosen (route.h).
#pragma once

#include <span>
#include <vector>

#include "kernels/route.h"
#include "reference/problem.h"

namespace mxdiff {

struct DispatchShape {
  int groups = 0;
  int max_group_rows = 0;  // the most rows any group owns
  int n = 0;
  int k = 0;

  friend bool operator==(const DispatchShape&, const DispatchShape&) = default;
};

DispatchShape ShapeOf(int n, int k, std::span<const int32_t> row_offsets);

// Always a tactic the builtin registry holds; `multiprocessors` sizes the split count.
Tactic TableTactic(const DispatchShape& shape, int multiprocessors);

// Every tactic worth measuring for the shape among the registry's ordinary kernels (split
// counts that give distinct partitions), for the tuner.
std::vector<Tactic> CandidateTactics(const KernelRegistry& registry, const DispatchShape& shape);

}  // namespace mxdiff
