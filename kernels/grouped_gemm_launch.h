// Checked launch of one grouped GEMM on device pointers with a plan made beforehand (PlanLaunch
// or PlanCapacityLaunch): checks every pointer and the workspace against the plan, and only then
// launches. No copies, no synchronization (callers: GemmRunner, the MoE layer). Errors come back before any launch; a CUDA launch error becomes Internal.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "kernels/kernel_launch.h"
#include "kernels/launch_plan.h"

namespace mxdiff {

struct DeviceGemmArgs {
  Transform transform = Transform::kOrdinary;
  Tactic tactic;
  int groups = 0;
  int n = 0;
  int k = 0;
  std::span<const int32_t> row_offsets;  // host copy of device_row_offsets: shape and grid
  const int32_t* device_row_offsets = nullptr;
  const int32_t* tile_map = nullptr;  // capacity launches only (kernel_launch.h)
  const uint16_t* activations = nullptr;
  const int32_t* row_source = nullptr;  // see KernelLaunch
  TileRouting tile_routing = {};
  uint16_t* record = nullptr;
  const uint8_t* codes = nullptr;
  const uint16_t* scales = nullptr;  // prepared for `transform`
  uint16_t* output = nullptr;
  int* semaphores = nullptr;  // split-K workspace, see kernel_launch.h
  size_t semaphore_count = 0;
  float* partials = nullptr;
  size_t partial_bytes = 0;
  void* stream = nullptr;
  bool dependent = false;  // see KernelLaunch
};

// `plan` is PlanLaunch(args.tactic, args.groups, args.n, args.k, args.row_offsets) (GemmRunner
// makes it once per run, with the route), or a capacity launch (PlanCapacityLaunch, with
// args.tile_map) for CUDA Graph replay, where args.row_offsets is not consulted.
absl::Status LaunchPlannedGroupedGemm(const DeviceGemmArgs& args, const LaunchPlan& plan);

}  // namespace mxdiff
