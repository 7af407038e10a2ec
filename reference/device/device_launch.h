// The device reference's kernels as plain launches (device_reference.cu), for
// device_reference.cc. Internal to reference/device/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "reference/device/reference_element.h"

namespace mxdiff::device_internal {

cudaError_t LaunchReferenceGemm(const GemmArgs& args);

cudaError_t LaunchChainSteps(int model, int rows, int k, const uint32_t* c, const uint16_t* a, const uint16_t* b,
                             uint32_t* d);

// Scale bytes per block of the admission count; the host reads the refused ones of a chunk back.
inline constexpr size_t kAdmissionChunk = 16384;

struct RefusedBytes {
  uint64_t bits[4] = {};  // bit raw: the fold admission refuses raw
};

// chunk_refused[c]: how many of bytes[c * kAdmissionChunk ...] (of `count`) are refused.
cudaError_t LaunchCountRefused(const uint8_t* bytes, size_t count, const RefusedBytes& refused,
                               uint32_t* chunk_refused);

}  // namespace mxdiff::device_internal
