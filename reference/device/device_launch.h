// The device reference's kernels as plain launches (device_reference.cu), for
// device_reference.cc. Internal to reference/device/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mxdiff::device_internal {

struct GemmArgs {
  int groups, n, k, rows;
  int cta_k, requested_splits;
  int transform;  // Transform
  int model;      // StepModel
  const int32_t* row_offsets;  // groups + 1, on the device
  const uint16_t* activations;  // rows x k
  const uint8_t* packed_codes;  // groups x n x k / 2
  const uint8_t* scale_bytes;   // groups x n x k / 32
  uint32_t* output;             // rows x n fp32 bits
};
cudaError_t LaunchReferenceGemm(const GemmArgs& args);

cudaError_t LaunchChainSteps(int model, int rows, int k, const uint32_t* c, const uint16_t* a, const uint16_t* b,
                             uint32_t* d);

}  // namespace mxdiff::device_internal
