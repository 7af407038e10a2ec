// The prepared scales of raw scale bytes already on the device (DeviceScales::WriteFromDevice):
// out[i] = prepared_scale(transform, raw[i]), the rule of reference/transform.h that the host's
// PrepareLayerScales tabulates. Launch entry point only; the caller checks the sizes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "reference/transform.h"

namespace mxdiff {

cudaError_t LaunchPrepareScales(Transform transform, const uint8_t* raw, size_t count, uint16_t* prepared,
                                cudaStream_t stream);

}  // namespace mxdiff
