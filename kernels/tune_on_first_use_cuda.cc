// The CUDA half of kernels/tune_on_first_use.h: the capture probe and the factory.
#include <cuda_runtime_api.h>

#include "kernels/tune_on_first_use.h"

namespace mxdiff {

absl::StatusOr<std::unique_ptr<TuneOnFirstUseRunner>> CreateTuneOnFirstUseRunner(int device,
                                                                                 TuneOnFirstUseOptions options) {
  absl::StatusOr<std::unique_ptr<GemmRunner>> inner = GemmRunner::Create(device);
  if (!inner.ok()) return inner.status();
  if (!options.capturing) {
    // A null stream is the runner's own, which callers never capture.
    options.capturing = [](void* stream) {
      if (stream == nullptr) return false;
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
        cudaGetLastError();
        return false;
      }
      return status != cudaStreamCaptureStatusNone;
    };
  }
  return std::make_unique<TuneOnFirstUseRunner>(*std::move(inner), std::move(options));
}

}  // namespace mxdiff
