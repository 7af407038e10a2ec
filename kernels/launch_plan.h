// Host-side planning and checking of one kernel launch, before anything touches the device:
// grid size, effective splits, workspace size, and every pointer and size the kernel relies on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel_launch.h"
#include "reference/problem.h"

namespace mxdiff {

struct LaunchPlan {
  int shape_index = 0;
  int m_tiles = 0;  // sum over groups of ceil(rows / cta_m)
  int n_tiles = 0;
  int splits = 1;   // effective, from split_plan.h
  int rows = 0;
  size_t semaphore_count = 0;  // split-K workspace, both 0 when splits == 1
  size_t partial_bytes = 0;

  long long ctas() const { return (long long)m_tiles * n_tiles * splits; }
};

// InvalidArgument for a tactic no instantiation has, an invalid shape or bad row offsets.
// Whether the tactic may launch at all is the registry's decision (route.h), taken before.
absl::StatusOr<LaunchPlan> PlanLaunch(const Tactic& tactic, int groups, int n, int k,
                                      std::span<const int32_t> row_offsets);

// A capacity launch (CUDA Graph replay with routings that change between replays): the grid
// has `m_tiles` M tiles and the activations up to `max_rows` rows whatever the device row
// offsets say when it runs; the kernel reads each CTA's tile from a device tile map
// (kernels/tile_map.h) and a CTA beyond the rows of the moment does nothing. The same checks as
// PlanLaunch; the workspace is sized for all `m_tiles`.
absl::StatusOr<LaunchPlan> PlanCapacityLaunch(const Tactic& tactic, int groups, int n, int k, int max_rows,
                                              int m_tiles);

// Null or misaligned pointers, a workspace smaller than the plan needs, fields that disagree
// with the plan: InvalidArgument, so the caller returns before any launch.
absl::Status CheckLaunch(const KernelLaunch& launch, const LaunchPlan& plan);

}  // namespace mxdiff
