// Whether this machine has a GPU the CUDA commands (calibrate, bench) can use, said in words a
// user reads. On a machine without an NVIDIA driver, cudaGetDeviceCount answers
// cudaErrorInsufficientDriver ("CUDA driver version is insufficient for CUDA runtime version"),
// which reads like an old driver; cudaErrorNoDevice where the driver sees no device. Both mean:
// no GPU here. Only where a driver is loaded (/proc/driver/nvidia/version) is "insufficient" a
// driver older than this build's runtime. CUDA builds only (MXDIFF_HAVE_CUDA).
#pragma once

#include <cuda_runtime.h>

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace mxdiff::cli {

// OK when CUDA device `device` exists. FailedPrecondition "no GPU: ..." when there is none,
// InvalidArgument for a device number past the devices found, Unavailable for another CUDA error.
inline absl::Status RequireGpu(int device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) cudaGetLastError();  // clear it: later calls must not see it
  std::error_code ignored;
  const bool driver_loaded = std::filesystem::exists("/proc/driver/nvidia/version", ignored);
  if (error == cudaErrorInsufficientDriver && driver_loaded) {
    return absl::UnavailableError(fmt::format(
        "the NVIDIA driver installed here is older than this build's CUDA runtime needs ({}); update the driver",
        cudaGetErrorName(error)));
  }
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver || (error == cudaSuccess && count == 0)) {
    return absl::FailedPreconditionError(fmt::format(
        "no GPU: this machine has no CUDA device ({})",
        error == cudaSuccess ? std::string("0 devices found")
                             : fmt::format("{}{}", cudaGetErrorName(error),
                                           driver_loaded ? "" : "; no NVIDIA driver is loaded")));
  }
  if (error != cudaSuccess) {
    return absl::UnavailableError(fmt::format("cannot use the GPU: cudaGetDeviceCount: {} ({})",
                                              cudaGetErrorString(error), cudaGetErrorName(error)));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(fmt::format("CUDA device {} does not exist ({} found)", device, count));
  }
  return absl::OkStatus();
}

}  // namespace mxdiff::cli
