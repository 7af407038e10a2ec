// A CUDA runtime result as an absl::Status: OK, or Internal naming what was attempted, the
// error's text and its name ("copy codes: out of memory (cudaErrorMemoryAllocation)").
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace mxdiff {

inline absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  // Concatenated, not fmt::format: nvcc (the tests' .cu helpers include this) rejects fmt's
  // compile-time format strings.
  std::string text(what);
  text.append(": ").append(cudaGetErrorString(error)).append(" (").append(cudaGetErrorName(error)).append(")");
  return absl::InternalError(text);
}

}  // namespace mxdiff
