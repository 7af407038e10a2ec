#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "kernels/cuda_status.h"
#include "reference/status_macros.h"
#include "tests/kernels/ffma_rate.h"

namespace mxdiff::testing {
namespace {

constexpr int kChains = 8;
constexpr int kIterations = 4096;

__global__ void FfmaKernel(float seed, float* sink) {
  float acc[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) acc[c] = seed + threadIdx.x + c;
  const float a = 1.0000001f;
  const float b = 1e-7f;
  for (int i = 0; i < kIterations; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) acc[c] = fmaf(acc[c], a, b);
  }
  float total = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) total += acc[c];
  if (total == 12345.0f) *sink = total;  // keeps the chains alive
}

}  // namespace

absl::StatusOr<double> MeasureFfmaPerSecond() {
  int device = 0;
  cudaDeviceProp properties{};
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties"));
  float* sink = nullptr;
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&sink, sizeof(float)), "cudaMalloc"));
  const int blocks = properties.multiProcessorCount * 8;
  const int threads = 256;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  FfmaKernel<<<blocks, threads>>>(1.0f, sink);
  cudaEventRecord(start);
  constexpr int kLaunches = 10;
  for (int i = 0; i < kLaunches; ++i) FfmaKernel<<<blocks, threads>>>(1.0f, sink);
  cudaEventRecord(stop);
  absl::Status status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float milliseconds = 0;
  cudaEventElapsedTime(&milliseconds, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(sink);
  if (!status.ok()) return status;
  const double fmas = double(kLaunches) * blocks * threads * kIterations * kChains;
  return fmas / (milliseconds * 1e-3);
}

}  // namespace mxdiff::testing
