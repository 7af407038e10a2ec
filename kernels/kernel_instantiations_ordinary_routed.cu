#include "kernels/kernel_instantiations.cuh"

namespace mxdiff {

cudaError_t LaunchOrdinaryRoutedKernel(const KernelLaunch& launch) {
  return LaunchTransform<Transform::kOrdinary, ActivationRows::kRouted>(launch);
}

}  // namespace mxdiff
