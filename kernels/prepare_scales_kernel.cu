#include "kernels/prepare_scales_kernel.h"

namespace mxdiff {
namespace {

constexpr int kThreads = 256;

__global__ void PrepareScalesKernel(Transform transform, const uint8_t* raw, size_t count, uint16_t* prepared) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    prepared[i] = prepared_scale(transform, raw[i]);
  }
}

}  // namespace

cudaError_t LaunchPrepareScales(Transform transform, const uint8_t* raw, size_t count, uint16_t* prepared,
                                cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  PrepareScalesKernel<<<unsigned(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(transform, raw, count,
                                                                                          prepared);
  return cudaGetLastError();
}

}  // namespace mxdiff
