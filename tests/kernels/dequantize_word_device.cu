#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "kernels/cuda_status.h"
#include "reference/status_macros.h"
#include "reference/transform.h"
#include "tests/kernels/dequantize_word_device.h"

namespace mxdiff::testing {
namespace {

constexpr int kScaleBits = 65536;

struct DeviceMismatches {
  unsigned long long count;
  unsigned long long first;  // index (transform, scale, byte) << 19 | k << 16 | got, or ~0
};

__global__ void CompareKernel(const uint16_t* expected, DeviceMismatches* mismatches) {
  const uint32_t index = blockIdx.x * blockDim.x + threadIdx.x;  // transform, scale, byte
  const uint32_t byte = index & 0xFF;
  const uint32_t scale = (index >> 8) & 0xFFFF;
  const uint32_t transform = index >> 24;
  const uint32_t word = TestWord(byte);
  uint32_t pairs[4];
  dequantize_word(transform == 0 ? Transform::kOrdinary : Transform::kFolded, word, uint16_t(scale), pairs);
  const uint16_t* want = expected + (size_t(transform) * kScaleBits + scale) * 16;
  for (int k = 0; k < 8; ++k) {
    const uint16_t got = uint16_t(pairs[k / 2] >> (16 * (k % 2)));
    if (got != want[(word >> (4 * k)) & 0xF]) {
      atomicAdd(&mismatches->count, 1ull);
      atomicCAS(&mismatches->first, ~0ull, (unsigned long long)(index) << 19 | unsigned(k) << 16 | got);
    }
  }
}

// Frees what it holds on every path out.
template <typename T>
struct DeviceBuffer {
  T* data = nullptr;
  ~DeviceBuffer() { cudaFree(data); }
};

}  // namespace

absl::StatusOr<WordMismatches> CompareDequantizeWordOnDevice(const std::vector<uint16_t>& expected) {
  if (expected.size() != size_t(2) * kScaleBits * 16) return absl::InvalidArgumentError("table size");
  DeviceBuffer<uint16_t> device_expected;
  DeviceBuffer<DeviceMismatches> device_mismatches;
  const DeviceMismatches initial{0, ~0ull};
  DeviceMismatches found{};
  const size_t table_bytes = expected.size() * sizeof(uint16_t);
  if (absl::Status status = CudaStatus(cudaMalloc(&device_expected.data, table_bytes), "cudaMalloc");
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CudaStatus(cudaMalloc(&device_mismatches.data, sizeof initial), "cudaMalloc");
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          CudaStatus(cudaMemcpy(device_expected.data, expected.data(), table_bytes, cudaMemcpyHostToDevice),
                     "cudaMemcpy");
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CudaStatus(
          cudaMemcpy(device_mismatches.data, &initial, sizeof initial, cudaMemcpyHostToDevice), "cudaMemcpy");
      !status.ok()) {
    return status;
  }
  CompareKernel<<<2 * kScaleBits, 256>>>(device_expected.data, device_mismatches.data);
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), "launch"));
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "CompareKernel"));
  if (absl::Status status = CudaStatus(
          cudaMemcpy(&found, device_mismatches.data, sizeof found, cudaMemcpyDeviceToHost), "cudaMemcpy");
      !status.ok()) {
    return status;
  }
  WordMismatches result{.count = found.count};
  if (found.count > 0) {
    const uint32_t index = uint32_t(found.first >> 19);
    result.k = int((found.first >> 16) & 7);
    result.got = uint16_t(found.first);
    result.transform = int(index >> 24);
    result.scale_bits = uint16_t(index >> 8);
    result.word = TestWord(index & 0xFF);
    const uint32_t code = (result.word >> (4 * result.k)) & 0xF;
    result.want = expected[(size_t(result.transform) * kScaleBits + result.scale_bits) * 16 + code];
  }
  return result;
}

}  // namespace mxdiff::testing
