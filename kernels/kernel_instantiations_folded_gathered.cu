#include "kernels/kernel_instantiations.cuh"

namespace mxdiff {

cudaError_t LaunchFoldedGatheredKernel(const KernelLaunch& launch) {
  return LaunchTransform<Transform::kFolded, ActivationRows::kGathered>(launch);
}

}  // namespace mxdiff
