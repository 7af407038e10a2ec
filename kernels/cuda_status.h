// A CUDA runtime result as an absl::Status: OK, or Internal naming what was attempted, the
// error's text and its name ("copy codes: out of memory (cudaErrorMemoryAllocation)").
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace mxdiff {

inline absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(fmt::format("{}: {} ({})", what, cudaGetErrorString(error), cudaGetErrorName(error)));
}

}  // namespace mxdiff
