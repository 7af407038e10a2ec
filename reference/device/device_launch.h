// The device reference's kernels as plain launches (device_reference.cu), for
// device_reference.cc. Internal to reference/device/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "reference/device/reference_element.h"

namespace mxdiff::device_internal {

cudaError_t LaunchReferenceGemm(const GemmArgs& args);

cudaError_t LaunchChainSteps(int model, int rows, int k, const uint32_t* c, const uint16_t* a, const uint16_t* b,
                             uint32_t* d);

}  // namespace mxdiff::device_internal
