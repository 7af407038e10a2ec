#include "kernels/launch_plan.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "fmt/core.h"
#include "kernels/builtin_kernels.h"
#include "kernels/tile_raster.h"
#include "reference/split_plan.h"
#include "reference/status_macros.h"

namespace mxdiff {
namespace {

// Device index arithmetic is int for rows, columns and k; sizes beyond this are refused.
constexpr long long kMaxElements = std::numeric_limits<int32_t>::max();

absl::Status CheckPointer(std::string_view what, const void* pointer, size_t alignment) {
  if (pointer == nullptr) return absl::InvalidArgumentError(fmt::format("{} is null", what));
  if (reinterpret_cast<uintptr_t>(pointer) % alignment != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{} ({}) is not aligned to {} bytes", what, pointer, alignment));
  }
  return absl::OkStatus();
}

// A self-routed launch (tile_routing.h): its device pointers and a routing one CTA can schedule.
absl::Status CheckTileRouting(const TileRouting& r) {
  if (r.expert_ids == nullptr) return absl::OkStatus();
  MXDIFF_RETURN_IF_ERROR(CheckPointer("tile_routing expert_ids", r.expert_ids, alignof(int32_t)));
  MXDIFF_RETURN_IF_ERROR(CheckPointer("tile_routing tokens", r.tokens, alignof(int32_t)));
  if (r.max_tokens < 1 || r.top_k < 1 || r.max_tokens * r.top_k > kMaxSelfRoutedEntries) {
    return absl::InvalidArgumentError(fmt::format(
        "tile_routing: {} tokens x top_k {} must be 1..{} entries (one CTA schedules them)", r.max_tokens, r.top_k,
        kMaxSelfRoutedEntries));
  }
  if (r.experts < 1 || r.other_cta_m < 1 || r.other_capacity < 0 || (r.shared_expert != 0 && r.shared_expert != 1)) {
    return absl::InvalidArgumentError(fmt::format("tile_routing: experts {}, shared expert {}, other cta_m {}, other capacity {}",
                                                  r.experts, r.shared_expert, r.other_cta_m, r.other_capacity));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LaunchPlan> PlanLaunch(const Tactic& tactic, int groups, int n, int k,
                                      std::span<const int32_t> row_offsets) {
  MXDIFF_RETURN_IF_ERROR(ValidateTactic(tactic));
  LaunchPlan plan;
  plan.shape_index = CtaShapeIndex(tactic);
  if (plan.shape_index < 0) {
    return absl::InvalidArgumentError(fmt::format("no kernel is instantiated for CTA {}x{}x{}", tactic.cta_m,
                                                  tactic.cta_n, tactic.cta_k));
  }
  if (groups < 1) return absl::InvalidArgumentError(fmt::format("groups must be >= 1, got {}", groups));
  if (n < 1) return absl::InvalidArgumentError(fmt::format("N must be >= 1, got {}", n));
  if (k < kBlockK || k % kBlockK != 0) {
    return absl::InvalidArgumentError(fmt::format("K must be a positive multiple of {}, got {}", kBlockK, k));
  }
  if (row_offsets.size() != size_t(groups) + 1) {
    return absl::InvalidArgumentError(
        fmt::format("row_offsets has {} entries, {} groups need {}", row_offsets.size(), groups, groups + 1));
  }
  if (row_offsets[0] != 0) {
    return absl::InvalidArgumentError(fmt::format("row_offsets[0] must be 0, got {}", row_offsets[0]));
  }
  long long m_tiles = 0;
  for (int g = 0; g < groups; ++g) {
    const long long rows = (long long)row_offsets[g + 1] - row_offsets[g];
    if (rows < 0) {
      return absl::InvalidArgumentError(fmt::format("row_offsets must ascend: [{}] = {} < [{}] = {}", g + 1,
                                                    row_offsets[g + 1], g, row_offsets[g]));
    }
    m_tiles += (rows + tactic.cta_m - 1) / tactic.cta_m;
  }
  plan.rows = row_offsets[groups];
  if ((long long)plan.rows * k > kMaxElements || (long long)plan.rows * n > kMaxElements ||
      (long long)n * k > kMaxElements) {
    return absl::InvalidArgumentError(
        fmt::format("M x K, M x N or N x K exceeds {} elements (M {}, N {}, K {})", kMaxElements, plan.rows, n, k));
  }
  plan.m_tiles = int(m_tiles);
  plan.n_tiles = (n + tactic.cta_n - 1) / tactic.cta_n;
  plan.splits = effective_splits(k, tactic.cta_k, tactic.splits);
  if (plan.ctas() > kMaxElements) {
    return absl::InvalidArgumentError(fmt::format("{} CTAs exceed the grid limit", plan.ctas()));
  }
  if (plan.splits > 1) {
    const size_t tiles = size_t(plan.m_tiles) * plan.n_tiles;
    plan.semaphore_count = tiles;
    plan.partial_bytes = tiles * size_t(plan.splits) * size_t(tactic.cta_m) * size_t(tactic.cta_n) * sizeof(float);
  }
  return plan;
}

absl::StatusOr<LaunchPlan> PlanCapacityLaunch(const Tactic& tactic, int groups, int n, int k, int max_rows,
                                              int m_tiles) {
  if (max_rows < 0 || m_tiles < 0) {
    return absl::InvalidArgumentError(
        fmt::format("a capacity launch needs max_rows >= 0 and m_tiles >= 0, got {} and {}", max_rows, m_tiles));
  }
  // Shape, tactic and size checks of PlanLaunch, with every row in the first group.
  std::vector<int32_t> offsets(size_t(std::max(groups, 0)) + 1, max_rows);
  offsets[0] = 0;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(tactic, groups, n, k, offsets);
  if (!plan.ok()) return plan.status();
  plan->m_tiles = m_tiles;
  if (plan->ctas() > kMaxElements) {
    return absl::InvalidArgumentError(fmt::format("{} CTAs exceed the grid limit", plan->ctas()));
  }
  if (plan->splits > 1) {
    const size_t tiles = size_t(plan->m_tiles) * plan->n_tiles;
    plan->semaphore_count = tiles;
    plan->partial_bytes = tiles * size_t(plan->splits) * size_t(tactic.cta_m) * size_t(tactic.cta_n) * sizeof(float);
  }
  return plan;
}

absl::Status CheckLaunch(const KernelLaunch& launch, const LaunchPlan& plan) {
  if (launch.shape_index != plan.shape_index || launch.splits != plan.splits ||
      launch.m_tiles != plan.m_tiles || launch.n_tiles != plan.n_tiles) {
    return absl::InvalidArgumentError("launch fields disagree with its plan");
  }
  MXDIFF_RETURN_IF_ERROR(CheckPointer("row_offsets", launch.row_offsets, alignof(int32_t)));
  if (launch.tile_map != nullptr) {  // read as one 16-byte entry per tile
    MXDIFF_RETURN_IF_ERROR(CheckPointer("tile_map", launch.tile_map, 16));
  }
  // Activations are read 8 bytes at a time and codes 16 at a time (rows of K/2 bytes, K a
  // multiple of 32, keep every row aligned when the base is).
  MXDIFF_RETURN_IF_ERROR(CheckPointer("activations", launch.activations, 8));
  MXDIFF_RETURN_IF_ERROR(CheckPointer("codes", launch.codes, 16));
  MXDIFF_RETURN_IF_ERROR(CheckPointer("scales", launch.scales, alignof(uint16_t)));
  MXDIFF_RETURN_IF_ERROR(CheckPointer("output", launch.output, alignof(uint16_t)));
  if (launch.row_source != nullptr) {
    MXDIFF_RETURN_IF_ERROR(CheckPointer("row_source", launch.row_source, alignof(int32_t)));
  }
  MXDIFF_RETURN_IF_ERROR(CheckTileRouting(launch.tile_routing));
  const bool gathered = launch.row_source != nullptr || launch.tile_routing.expert_ids != nullptr;
  if (launch.record != nullptr) {  // written 8 bytes at a time, as the activations are read
    if (!gathered) return absl::InvalidArgumentError("record is only for a gathered launch (row_source or tile_routing)");
    MXDIFF_RETURN_IF_ERROR(CheckPointer("record", launch.record, 8));
  }
  if (plan.splits > 1) {
    MXDIFF_RETURN_IF_ERROR(CheckPointer("split-K semaphores", launch.semaphores, alignof(int32_t)));
    MXDIFF_RETURN_IF_ERROR(CheckPointer("split-K partials", launch.partials, kPartialsAlign));
    if (launch.semaphore_count < plan.semaphore_count || launch.partial_bytes < plan.partial_bytes) {
      return absl::InvalidArgumentError(fmt::format(
          "workspace too small: {} splits over {} tiles need {} semaphores and {} partial bytes, got {} and {}",
          plan.splits, plan.semaphore_count, plan.semaphore_count, plan.partial_bytes, launch.semaphore_count,
          launch.partial_bytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace mxdiff
