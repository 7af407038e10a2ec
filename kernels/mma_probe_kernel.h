// Launch of the calibration probe kernel on device buffers (mma_probe_kernel.cu).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace mxdiff {

cudaError_t LaunchMmaProbeKernel(int warps, int steps, const uint16_t* a, const uint16_t* b, const uint32_t* c,
                                 uint32_t* d, int* device_arch);

}  // namespace mxdiff
