// One device allocation (cudaMalloc), freed on destruction, and the copies between it and the
// host. Host copies are complete when they return: a pageable cudaMemcpy may return while its
// DMA is still under way, on the legacy stream, which the non-blocking streams that the runner,
// the MoE layer and the bench launch on do not wait for, so a kernel launched right after it can
// read the destination before the data lands (seen as nondeterministic bits on a loaded GPU).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"

namespace mxdiff {

// Copies `bytes` from the host to `device` through `stream` and waits until they have landed.
absl::Status CopyToDeviceAndWait(void* device, const void* host, size_t bytes, cudaStream_t stream,
                                 std::string_view what);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // A new allocation of `bytes` (contents undefined) in place of the old one.
  absl::Status Allocate(size_t bytes, std::string_view what);
  // At least `bytes`: reallocates only to grow; `grown` says whether the contents were dropped.
  absl::Status Reserve(size_t bytes, std::string_view what, bool* grown = nullptr);

  // Copies `host` to byte `offset` of the buffer through `stream` and waits until it has landed,
  // so a kernel on any stream of the device sees it.
  absl::Status Upload(const void* host, size_t bytes, size_t offset, cudaStream_t stream, std::string_view what);
  template <typename T>
  absl::Status Upload(std::span<const T> host, cudaStream_t stream, std::string_view what) {
    return Upload(host.data(), host.size_bytes(), 0, stream, what);
  }
  // Copies `bytes` from byte `offset` of the buffer after the work already on `stream`.
  absl::Status Download(void* host, size_t bytes, size_t offset, cudaStream_t stream, std::string_view what) const;
  // Every byte of the buffer set to `value`, ordered on `stream` (no wait).
  absl::Status Fill(uint8_t value, cudaStream_t stream, std::string_view what);

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace mxdiff
