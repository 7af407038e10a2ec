// A layer's prepared scales on the device, one buffer per transform: the one device-layer
// preparation of the GEMM runner's layers (gemm_runner.cc) and the MoE layer's GEMMs
// (moe_layer.cc). What goes up is decided by PreparesTransform (kernels/admitted_scales.h) on the
// verdicts AdmittedScales carries: the ordinary scales always, the folded ones only for admitted
// experts. Needs CUDA (mxdiff_kernels_cuda).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/admitted_scales.h"
#include "kernels/device_buffer.h"

namespace mxdiff {

class DeviceScales {
 public:
  // Room for `count` prepared scales in the buffer of every transform PreparesTransform grants
  // `admission` (the MoE layer passes an admitted one: its experts' verdicts change with each write).
  absl::Status Allocate(size_t count, const LayerAdmission& admission);

  // Prepares the bytes (PrepareLayerScales) and uploads them from scale `offset` on: the ordinary
  // scales of every expert, the folded ones of each expert whose own verdict admits it (a refused
  // expert's folded range keeps what it held). Waits until they have landed.
  absl::Status Write(const AdmittedScales& scales, size_t offset, cudaStream_t stream);

  // The `count` raw bytes at `device_raw` (on this device; the caller admitted these very bytes
  // as one layer: `admission`) prepared on the device into every buffer PreparesTransform grants
  // that admission, from scale 0 on: nothing crosses PCIe. Waits until they are written.
  absl::Status WriteFromDevice(const uint8_t* device_raw, size_t count, const LayerAdmission& admission,
                               cudaStream_t stream);

  // Every one of `count` scales (from 0) prepared from the one raw byte `raw`, whose verdict the
  // caller knows (`admission`: the MoE layer's initial raw 127, 2^0, admitted), in each buffer
  // PreparesTransform grants it. Admits nothing. Waits until they have landed.
  absl::Status Fill(uint8_t raw, const LayerAdmission& admission, size_t count, cudaStream_t stream);

  // The device scales a `transform` kernel reads; null where that transform was never allocated.
  const uint16_t* scales(Transform transform) const { return buffers_[int(transform)].as<uint16_t>(); }

 private:
  // InvalidArgument where the transform's buffer holds fewer than `count` scales.
  absl::Status CheckRoom(Transform transform, size_t count) const;

  DeviceBuffer buffers_[kTransformCount];
};

}  // namespace mxdiff
