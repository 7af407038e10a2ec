#include "kernels/kernel_instantiations.cuh"

namespace mxdiff {

cudaError_t LaunchOrdinaryKernel(const KernelLaunch& launch) { return LaunchTransform<Transform::kOrdinary, ActivationRows::kPlain>(launch); }

}  // namespace mxdiff
