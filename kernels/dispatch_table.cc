#include "kernels/dispatch_table.h"

#include <algorithm>

#include "kernels/builtin_kernels.h"
#include "reference/decode_shapes.h"
#include "reference/split_plan.h"

namespace mxdiff {
namespace {

struct TableEntry {
  DispatchShape shape;
  Tactic tactic;
};

// Decode, 6 experts x 1 row (PP2 x TP4 and TP8): the fastest candidates of GemmRunner::Tune on
// the H200 (kernel_benchmark --tune; kernels/README.md has the figures).
constexpr DispatchShape Decode(const DecodeShape& shape) {
  return DispatchShape{.groups = kDecodeTopK, .max_group_rows = 1, .n = shape.n, .k = shape.k};
}
constexpr TableEntry kTable[] = {
    {Decode(kW13Tp4), {8, 128, 64, 16, 0}},
    {Decode(kW2Tp4), {8, 128, 64, 2, 0}},
    {Decode(kW13Tp8), {8, 128, 64, 16, 0}},
    {Decode(kW2Tp8), {8, 128, 64, 2, 0}},
};

// Aim for this many CTAs per multiprocessor before splitting K further.
constexpr int kCtasPerMultiprocessor = 4;

}  // namespace

DispatchShape ShapeOf(int n, int k, std::span<const int32_t> row_offsets) {
  DispatchShape shape{.groups = int(row_offsets.size()) - 1, .max_group_rows = 0, .n = n, .k = k};
  for (size_t g = 0; g + 1 < row_offsets.size(); ++g) {
    shape.max_group_rows = std::max(shape.max_group_rows, row_offsets[g + 1] - row_offsets[g]);
  }
  return shape;
}

Tactic TableTactic(const DispatchShape& shape, int multiprocessors) {
  for (const TableEntry& entry : kTable) {
    if (entry.shape == shape) return entry.tactic;
  }
  const CtaShape* cta = &kCtaShapes[kCtaShapeCount - 1];
  for (const CtaShape& candidate : kCtaShapes) {
    if (candidate.m >= shape.max_group_rows) {
      cta = &candidate;
      break;
    }
  }
  const long long m_tiles = (long long)std::max(shape.groups, 1) *
                            std::max(1, (shape.max_group_rows + cta->m - 1) / cta->m);
  const long long tiles = m_tiles * ((std::max(shape.n, 1) + cta->n - 1) / cta->n);
  const long long wanted = (long long)std::max(multiprocessors, 1) * kCtasPerMultiprocessor;
  const int splits = int(std::clamp<long long>((wanted + tiles - 1) / tiles, 1, 64));
  return Tactic{.cta_m = cta->m, .cta_n = cta->n, .cta_k = cta->k, .splits = splits, .swizzle = 0};
}

std::vector<Tactic> CandidateTactics(const KernelRegistry& registry, const DispatchShape& shape) {
  std::vector<Tactic> candidates;
  for (Tactic tactic : registry.OrdinaryTactics()) {
    // A CTA taller than twice the largest group only multiplies padding rows.
    if (tactic.cta_m > 8 && tactic.cta_m >= 2 * std::max(shape.max_group_rows, 1)) continue;
    int last_effective = 0;
    for (int splits : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
      const int effective = effective_splits(std::max(shape.k, kBlockK), tactic.cta_k, splits);
      if (effective == last_effective) continue;
      last_effective = effective;
      tactic.splits = effective;
      tactic.swizzle = 0;
      candidates.push_back(tactic);
    }
  }
  return candidates;
}

}  // namespace mxdiff
