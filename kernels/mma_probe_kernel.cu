#include "kernels/mma_m8n8k4.cuh"
#include "kernels/mma_probe_kernel.h"

namespace mxdiff {
namespace {

__global__ void MmaProbeKernel(int steps, const uint16_t* a, const uint16_t* b, const uint32_t* c, uint32_t* d,
                               int* device_arch) {
  const int warp = blockIdx.x;
  const int lane = threadIdx.x;
  float acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = __uint_as_float(c[(size_t(warp) * 32 + lane) * 8 + i]);
  for (int s = 0; s < steps; ++s) {
    const size_t base = ((size_t(warp) * steps + s) * 32 + lane) * 4;
    const uint32_t a01 = a[base] | (uint32_t(a[base + 1]) << 16);
    const uint32_t a23 = a[base + 2] | (uint32_t(a[base + 3]) << 16);
    const uint32_t b01 = b[base] | (uint32_t(b[base + 1]) << 16);
    const uint32_t b23 = b[base + 2] | (uint32_t(b[base + 3]) << 16);
    MmaM8N8K4(acc, a01, a23, b01, b23);
  }
  for (int i = 0; i < 8; ++i) d[(size_t(warp) * 32 + lane) * 8 + i] = __float_as_uint(acc[i]);
  if (warp == 0 && lane == 0) {
#if defined(__CUDA_ARCH__)
    *device_arch = __CUDA_ARCH__;
#endif
  }
}

}  // namespace

cudaError_t LaunchMmaProbeKernel(int warps, int steps, const uint16_t* a, const uint16_t* b, const uint32_t* c,
                                 uint32_t* d, int* device_arch) {
  MmaProbeKernel<<<warps, 32>>>(steps, a, b, c, d, device_arch);
  return cudaGetLastError();
}

}  // namespace mxdiff
