#include "kernels/device_scales.h"

#include <algorithm>
#include <vector>

#include "fmt/core.h"
#include "kernels/cuda_status.h"
#include "kernels/prepare_scales_kernel.h"
#include "kernels/route.h"
#include "reference/prepare_layer_scales.h"
#include "reference/status_macros.h"

namespace mxdiff {

absl::Status DeviceScales::Allocate(size_t count, const LayerAdmission& admission) {
  for (int t = 0; t < kTransformCount; ++t) {
    if (!PreparesTransform(Transform(t), admission)) continue;
    MXDIFF_RETURN_IF_ERROR(buffers_[t].Allocate(count * sizeof(uint16_t), "prepared scales"));
  }
  return absl::OkStatus();
}

absl::Status DeviceScales::CheckRoom(Transform transform, size_t count) const {
  const DeviceBuffer& buffer = buffers_[int(transform)];
  if (buffer.bytes() >= count * sizeof(uint16_t)) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{} prepared scales: the {} buffer holds {}", count,
                                                TransformName(transform), buffer.bytes() / sizeof(uint16_t)));
}

absl::Status DeviceScales::Fill(uint8_t raw, const LayerAdmission& admission, size_t count, cudaStream_t stream) {
  for (int t = 0; t < kTransformCount; ++t) {
    if (!PreparesTransform(Transform(t), admission)) continue;
    MXDIFF_RETURN_IF_ERROR(CheckRoom(Transform(t), count));
    const std::vector<uint16_t> every(count, prepared_scale(Transform(t), raw));
    MXDIFF_RETURN_IF_ERROR(buffers_[t].Upload(std::span<const uint16_t>(every), stream, "copy scales"));
  }
  return absl::OkStatus();
}

absl::Status DeviceScales::WriteFromDevice(const uint8_t* device_raw, size_t count, const LayerAdmission& admission,
                                           cudaStream_t stream) {
  for (int t = 0; t < kTransformCount; ++t) {
    if (!PreparesTransform(Transform(t), admission)) continue;
    MXDIFF_RETURN_IF_ERROR(CheckRoom(Transform(t), count));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(
        LaunchPrepareScales(Transform(t), device_raw, count, buffers_[t].as<uint16_t>(), stream), "prepare scales"));
  }
  return CudaStatus(cudaStreamSynchronize(stream), "prepare scales");
}

absl::Status DeviceScales::Write(const AdmittedScales& scales, size_t offset, cudaStream_t stream) {
  const size_t count = scales.bytes().size(), per = scales.per_expert(), experts = scales.experts().size();
  std::vector<uint16_t> prepared(count);
  for (int t = 0; t < kTransformCount; ++t) {
    const Transform transform = Transform(t);
    auto prepares = [&](size_t e) { return PreparesTransform(transform, scales.experts()[e]); };
    bool prepared_yet = false;
    // Each run of consecutive experts that this transform prepares goes up in one copy.
    for (size_t begin = 0, end = 0; begin < experts; begin = end) {
      if (!prepares(begin)) {
        end = begin + 1;
        continue;
      }
      for (end = begin; end < experts && prepares(end);) ++end;
      const size_t first = begin * per, last = std::min(end * per, count);
      if (buffers_[t].bytes() < (offset + last) * sizeof(uint16_t)) {
        return absl::InvalidArgumentError(fmt::format("{} prepared scales at {}: the {} buffer holds {}", count,
                                                      offset, TransformName(transform),
                                                      buffers_[t].bytes() / sizeof(uint16_t)));
      }
      if (!prepared_yet) PrepareLayerScales(transform, scales.bytes(), prepared);
      prepared_yet = true;
      MXDIFF_RETURN_IF_ERROR(buffers_[t].Upload(prepared.data() + first, (last - first) * sizeof(uint16_t),
                                                (offset + first) * sizeof(uint16_t), stream, "copy scales"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mxdiff
