// Entry points of the instantiated kernels, one per transform and kind (each in its own .cu so
// that they compile in parallel). The caller has checked the launch (launch_plan.h); these only launch.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/kernel_launch.h"

namespace mxdiff {

cudaError_t LaunchOrdinaryKernel(const KernelLaunch& launch);  // kernel_instantiations_ordinary.cu
cudaError_t LaunchFoldedKernel(const KernelLaunch& launch);    // kernel_instantiations_folded.cu
// With launch.row_source (and launch.record): the MoE layer's W13.
cudaError_t LaunchOrdinaryGatheredKernel(const KernelLaunch& launch);  // kernel_instantiations_ordinary_gathered.cu
cudaError_t LaunchFoldedGatheredKernel(const KernelLaunch& launch);    // kernel_instantiations_folded_gathered.cu
// With launch.tile_routing (and launch.record): the MoE layer's W13 at decode batch sizes.
cudaError_t LaunchOrdinaryRoutedKernel(const KernelLaunch& launch);  // kernel_instantiations_ordinary_routed.cu
cudaError_t LaunchFoldedRoutedKernel(const KernelLaunch& launch);    // kernel_instantiations_folded_routed.cu

}  // namespace mxdiff
