#include "kernels/kernel_instantiations.cuh"

namespace mxdiff {

cudaError_t LaunchFoldedKernel(const KernelLaunch& launch) { return LaunchTransform<Transform::kFolded, ActivationRows::kPlain>(launch); }

}  // namespace mxdiff
