// Host side of the device materialization: sizes, the tables, device memory and CUDA errors as
// absl::Status.
#include "fuzz/formats/tensor_recipe_device.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "fmt/core.h"
#include "fuzz/formats/tensor_recipe_device_launch.h"
#include "fuzz/formats/tensor_recipe_element.h"

namespace mxdiff::fuzz {
namespace {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = fmt::format("device materialization: {}: {}", what, cudaGetErrorString(error));
  cudaGetLastError();  // clear a non-sticky error for the next call
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

}  // namespace

bool DeviceMaterializationAvailable(std::string* why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (why != nullptr) *why = error != cudaSuccess ? cudaGetErrorString(error) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

absl::Status MaterializeOnDevice(TensorKind kind, const TensorRecipe& recipe, void* device_bytes, size_t byte_count) {
  if ((kind == TensorKind::kActivations && byte_count % 2 != 0) || (kind == TensorKind::kCodes && byte_count % 8 != 0)) {
    return absl::InvalidArgumentError(fmt::format("device materialization: {} bytes of {}", byte_count,
                                                  TensorKindName(kind)));
  }
  if (!ValueClassAllowed(kind, recipe.value_class)) {
    return absl::InvalidArgumentError(fmt::format("device materialization: class {} for {}",
                                                  ValueClassName(recipe.value_class), TensorKindName(kind)));
  }
  std::string why;
  if (!DeviceMaterializationAvailable(&why)) return absl::UnavailableError("device materialization: " + why);
  const size_t units = kind == TensorKind::kActivations ? byte_count / 2
                       : kind == TensorKind::kCodes     ? byte_count / 8
                                                        : byte_count;
  const RecipeTables tables = MakeRecipeTables(kind, recipe);
  if (absl::Status status = CudaStatus(device_internal::LaunchGenerate(int(kind), tables, device_bytes, units),
                                       "generator launch");
      !status.ok()) {
    return status;
  }
  for (size_t first = 0; first < recipe.overrides.size(); first += device_internal::kOverridesPerLaunch) {
    device_internal::OverrideBatch batch;
    batch.count = uint32_t(std::min<size_t>(device_internal::kOverridesPerLaunch, recipe.overrides.size() - first));
    for (uint32_t o = 0; o < batch.count; ++o) {
      batch.index[o] = recipe.overrides[first + o].index;
      batch.value[o] = recipe.overrides[first + o].value;
    }
    if (absl::Status status = CudaStatus(device_internal::LaunchOverrides(int(kind), batch, device_bytes, byte_count),
                                         "overrides launch");
        !status.ok()) {
      return status;
    }
  }
  return CudaStatus(cudaDeviceSynchronize(), "materialization");
}

absl::Status MaterializeOnDeviceToHost(TensorKind kind, const TensorRecipe& recipe, std::span<uint8_t> out) {
  std::string why;
  if (!DeviceMaterializationAvailable(&why)) return absl::UnavailableError("device materialization: " + why);
  void* device = nullptr;
  if (absl::Status status = CudaStatus(cudaMalloc(&device, std::max<size_t>(out.size(), 1)), "cudaMalloc");
      !status.ok()) {
    return status;
  }
  absl::Status status = MaterializeOnDevice(kind, recipe, device, out.size());
  if (status.ok() && !out.empty()) {
    status = CudaStatus(cudaMemcpy(out.data(), device, out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy from the device");
  }
  cudaFree(device);
  return status;
}

}  // namespace mxdiff::fuzz
