#include "kernels/kernel_instantiations.cuh"

namespace mxdiff {

cudaError_t LaunchOrdinaryGatheredKernel(const KernelLaunch& launch) {
  return LaunchTransform<Transform::kOrdinary, ActivationRows::kGathered>(launch);
}

}  // namespace mxdiff
