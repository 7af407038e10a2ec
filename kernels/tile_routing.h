// A capacity launch that finds its own tiles from the routing (the MoE layer's W13 at decode
// batch sizes): plain data, CUDA-free, shared by the host checks (launch_plan.cc) and the kernel
// (tile_routing.cuh). Each CTA schedules the routing's few entries itself, in the schedule of
// ScheduleMoeRouting and FindGroupTile's tile enumeration, so the launch needs neither the tile
// map nor the row tokens of the routing kernel and does not wait for it before its k loop.
#pragma once

#include <cstdint>

namespace mxdiff {

// Entries (max_tokens x top_k) one CTA of 128 threads schedules: one thread each.
inline constexpr int kMaxSelfRoutedEntries = 64;

struct TileRouting {
  const int32_t* tokens = nullptr;      // device scalar: this replay's tokens
  const int32_t* expert_ids = nullptr;  // device, max_tokens x top_k
  int max_tokens = 0;
  int top_k = 0;
  int experts = 0;        // routed experts; the shared expert, where there is one, is group `experts`
  int shared_expert = 0;  // 0 or 1
  // The other GEMM's (W2's) CTA rows and grid capacity in M tiles: a routing needing more tiles
  // than either grid has is refused, as the routing kernel refuses it.
  int other_cta_m = 0;
  int other_capacity = 0;
};

}  // namespace mxdiff
