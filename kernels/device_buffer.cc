#include "kernels/device_buffer.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"
#include "kernels/cuda_status.h"
#include "reference/status_macros.h"

namespace mxdiff {

absl::Status CopyToDeviceAndWait(void* device, const void* host, size_t bytes, cudaStream_t stream,
                                 std::string_view what) {
  if (bytes == 0) return absl::OkStatus();
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), what));
  return CudaStatus(cudaStreamSynchronize(stream), what);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { cudaFree(data_); }

absl::Status DeviceBuffer::Allocate(size_t bytes, std::string_view what) {
  cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
  // Never a null pointer, even for an empty tensor: kernels take the address unconditionally.
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&data_, std::max<size_t>(bytes, 16)),
                                    fmt::format("cudaMalloc of {} bytes for {}", bytes, what)));
  bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status DeviceBuffer::Reserve(size_t bytes, std::string_view what, bool* grown) {
  if (grown != nullptr) *grown = false;
  if (data_ != nullptr && bytes <= bytes_) return absl::OkStatus();
  MXDIFF_RETURN_IF_ERROR(Allocate(bytes, what));
  if (grown != nullptr) *grown = true;
  return absl::OkStatus();
}

absl::Status DeviceBuffer::Upload(const void* host, size_t bytes, size_t offset, cudaStream_t stream,
                                  std::string_view what) {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    return absl::InternalError(
        fmt::format("{}: {} bytes at offset {} do not fit a buffer of {}", what, bytes, offset, bytes_));
  }
  return CopyToDeviceAndWait(static_cast<uint8_t*>(data_) + offset, host, bytes, stream, what);
}

absl::Status DeviceBuffer::Download(void* host, size_t bytes, size_t offset, cudaStream_t stream,
                                    std::string_view what) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    return absl::InternalError(
        fmt::format("{}: {} bytes at offset {} do not fit a buffer of {}", what, bytes, offset, bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  MXDIFF_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host, static_cast<const uint8_t*>(data_) + offset, bytes, cudaMemcpyDeviceToHost, stream), what));
  return CudaStatus(cudaStreamSynchronize(stream), what);
}

absl::Status DeviceBuffer::Fill(uint8_t value, cudaStream_t stream, std::string_view what) {
  if (bytes_ == 0) return absl::OkStatus();
  return CudaStatus(cudaMemsetAsync(data_, value, bytes_, stream), what);
}

}  // namespace mxdiff
