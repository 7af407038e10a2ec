#include "kernels/kernel_instantiations.cuh"

namespace mxdiff {

cudaError_t LaunchFoldedRoutedKernel(const KernelLaunch& launch) {
  return LaunchTransform<Transform::kFolded, ActivationRows::kRouted>(launch);
}

}  // namespace mxdiff
