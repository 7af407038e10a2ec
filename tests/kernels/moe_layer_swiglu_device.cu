#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "kernels/cuda_status.h"
#include "reference/status_macros.h"
#include "reference/moe_layer_combine.h"
#include "reference/swiglu.h"
#include "tests/kernels/moe_layer_swiglu_device.h"

namespace mxdiff::testing {
namespace {

template <typename T>
struct Device {
  T* data = nullptr;
  ~Device() { cudaFree(data); }
  absl::Status Allocate(size_t count) { return CudaStatus(cudaMalloc(&data, count * sizeof(T) + 16), "cudaMalloc"); }
};

__global__ void SwigluSweepKernel(const uint16_t* ups, int up_count, float limit, uint16_t* out) {
  const size_t index = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= size_t(65536) * up_count) return;
  out[index] = swiglu_f16(uint16_t(index / up_count), ups[index % up_count], limit);
}

__global__ void ExpKernel(const uint32_t* in, size_t count, bool silu, uint32_t* out) {
  const size_t index = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= count) return;
  const float x = bits_to_f32(in[index]);
  out[index] = f32_to_bits(silu ? swiglu_silu(x) : swiglu_exp(x));
}

__global__ void CombineKernel(const uint32_t* acc, const uint32_t* weight, const uint16_t* y, size_t count,
                              uint32_t* out) {
  const size_t index = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= count) return;
  out[2 * index] = f32_to_bits(moe_combine_slot(bits_to_f32(acc[index]), bits_to_f32(weight[index]), y[index]));
  out[2 * index + 1] = f32_to_bits(moe_combine_shared(bits_to_f32(acc[index]), y[index]));
}

unsigned Blocks(size_t threads) { return unsigned((threads + 255) / 256); }

template <typename T>
absl::Status Upload(Device<T>& device, std::span<const T> host) {
  MXDIFF_RETURN_IF_ERROR(device.Allocate(host.size()));
  return CudaStatus(cudaMemcpy(device.data, host.data(), host.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
}

template <typename T>
absl::StatusOr<std::vector<T>> Download(const Device<T>& device, size_t count) {
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "kernel"));
  std::vector<T> host(count);
  if (absl::Status status = CudaStatus(cudaMemcpy(host.data(), device.data, count * sizeof(T), cudaMemcpyDeviceToHost),
                                 "cudaMemcpy");
      !status.ok()) {
    return status;
  }
  return host;
}

}  // namespace

absl::StatusOr<std::vector<uint16_t>> DeviceSwigluSweep(std::span<const uint16_t> ups, float limit) {
  Device<uint16_t> device_ups, out;
  const size_t count = size_t(65536) * ups.size();
  MXDIFF_RETURN_IF_ERROR(Upload(device_ups, ups));
  MXDIFF_RETURN_IF_ERROR(out.Allocate(count));
  SwigluSweepKernel<<<Blocks(count), 256>>>(device_ups.data, int(ups.size()), limit, out.data);
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), "launch"));
  return Download(out, count);
}

static absl::StatusOr<std::vector<uint32_t>> RunExp(std::span<const uint32_t> inputs, bool silu) {
  Device<uint32_t> in, out;
  MXDIFF_RETURN_IF_ERROR(Upload(in, inputs));
  MXDIFF_RETURN_IF_ERROR(out.Allocate(inputs.size()));
  ExpKernel<<<Blocks(inputs.size()), 256>>>(in.data, inputs.size(), silu, out.data);
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), "launch"));
  return Download(out, inputs.size());
}

absl::StatusOr<std::vector<uint32_t>> DeviceExp(std::span<const uint32_t> inputs) { return RunExp(inputs, false); }
absl::StatusOr<std::vector<uint32_t>> DeviceSilu(std::span<const uint32_t> inputs) { return RunExp(inputs, true); }

absl::StatusOr<std::vector<uint32_t>> DeviceCombine(std::span<const uint32_t> acc, std::span<const uint32_t> weight,
                                                    std::span<const uint16_t> y) {
  if (acc.size() != weight.size() || acc.size() != y.size()) return absl::InvalidArgumentError("sizes differ");
  Device<uint32_t> device_acc, device_weight, out;
  Device<uint16_t> device_y;
  for (absl::Status status : {Upload(device_acc, acc), Upload(device_weight, weight), Upload(device_y, y),
                              out.Allocate(2 * acc.size())}) {
    if (!status.ok()) return status;
  }
  CombineKernel<<<Blocks(acc.size()), 256>>>(device_acc.data, device_weight.data, device_y.data, acc.size(), out.data);
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), "launch"));
  return Download(out, 2 * acc.size());
}

}  // namespace mxdiff::testing
