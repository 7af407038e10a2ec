// What the GPU benchmarks (kernel_benchmark, moe_layer_benchmark) share: a benchmark has no test
// framework to report to, so a failed CUDA call or status prints where and why and exits 1; the
// median; and the device's measured copy rate, the bandwidth floor both compare against.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fmt/core.h"
#include "kernels/cuda_status.h"

namespace mxdiff::testing {

template <typename T>
T OrDie(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    fmt::print(stderr, "{}: {}\n", what, value.status().ToString());
    std::exit(1);
  }
  return *std::move(value);
}

inline void OrDie(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    fmt::print(stderr, "{}: {}\n", what, status.ToString());
    std::exit(1);
  }
}

// A failed CUDA call prints where and why (CudaStatus's text) and exits 1.
#define BENCH_CUDA(expression)                                                           \
  ::mxdiff::testing::OrDie(::mxdiff::CudaStatus((expression), #expression),               \
                           fmt::format("{}:{}", __FILE__, __LINE__).c_str())

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// Bytes per second of a 1 GiB device-to-device copy, read + write, median of five.
inline double MeasureCopyBytesPerSecond() {
  const size_t bytes = size_t(1) << 30;
  void *source = nullptr, *destination = nullptr;
  BENCH_CUDA(cudaMalloc(&source, bytes));
  BENCH_CUDA(cudaMalloc(&destination, bytes));
  BENCH_CUDA(cudaMemset(source, 0x5A, bytes));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> rates;
  for (int i = 0; i < 6; ++i) {
    BENCH_CUDA(cudaEventRecord(start));
    BENCH_CUDA(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice));
    BENCH_CUDA(cudaEventRecord(stop));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float milliseconds = 0;
    BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
    if (i > 0) rates.push_back(2.0 * bytes / (milliseconds * 1e-3));
  }
  cudaFree(source);
  cudaFree(destination);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Median(rates);
}

}  // namespace mxdiff::testing
