#include "kernels/grouped_gemm_launch.h"

#include <cuda_runtime_api.h>

#include "fmt/core.h"
#include "kernels/kernel_instantiations.h"
#include "reference/status_macros.h"

namespace mxdiff {

absl::Status LaunchPlannedGroupedGemm(const DeviceGemmArgs& args, const LaunchPlan& planned) {
  const LaunchPlan* plan = &planned;
  KernelLaunch launch{.transform = args.transform,
                      .shape_index = plan->shape_index,
                      .splits = plan->splits,
                      .swizzle = args.tactic.swizzle,
                      .groups = args.groups,
                      .n = args.n,
                      .k = args.k,
                      .m_tiles = plan->m_tiles,
                      .n_tiles = plan->n_tiles,
                      .row_offsets = args.device_row_offsets,
                      .tile_map = args.tile_map,
                      .activations = args.activations,
                      .row_source = args.row_source,
                      .tile_routing = args.tile_routing,
                      .record = args.record,
                      .codes = args.codes,
                      .scales = args.scales,
                      .output = args.output,
                      .semaphores = args.semaphores,
                      .semaphore_count = args.semaphore_count,
                      .partials = args.partials,
                      .partial_bytes = args.partial_bytes,
                      .stream = args.stream,
                      .dependent = args.dependent};
  MXDIFF_RETURN_IF_ERROR(CheckLaunch(launch, *plan));
  if (plan->ctas() == 0) return absl::OkStatus();  // no rows: nothing to compute or write
  const bool ordinary = args.transform == Transform::kOrdinary;
  const cudaError_t error =
      launch.tile_routing.expert_ids != nullptr
          ? (ordinary ? LaunchOrdinaryRoutedKernel(launch) : LaunchFoldedRoutedKernel(launch))
      : launch.row_source != nullptr ? (ordinary ? LaunchOrdinaryGatheredKernel(launch) : LaunchFoldedGatheredKernel(launch))
                                     : (ordinary ? LaunchOrdinaryKernel(launch) : LaunchFoldedKernel(launch));
  if (error != cudaSuccess) {
    return absl::InternalError(fmt::format("launch of {} {} failed: {}", args.transform == Transform::kOrdinary
                                                                             ? "ordinary" : "folded",
                                           TacticName(args.tactic), cudaGetErrorString(error)));
  }
  return absl::OkStatus();
}

}  // namespace mxdiff
