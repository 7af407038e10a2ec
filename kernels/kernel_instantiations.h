// Entry points of the instantiated kernels, one per transform (each in its own .cu so the two
// compile in parallel). The caller has checked the launch (launch_plan.h); these only launch.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/kernel_launch.h"

namespace mxdiff {

cudaError_t LaunchOrdinaryKernel(const KernelLaunch& launch);  // kernel_instantiations_ordinary.cu
cudaError_t LaunchFoldedKernel(const KernelLaunch& launch);    // kernel_instantiations_folded.cu

}  // namespace mxdiff
