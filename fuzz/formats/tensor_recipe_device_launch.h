// The device materialization's kernels as plain launches (tensor_recipe_device.cu), for
// tensor_recipe_device.cc. Internal.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "fuzz/formats/tensor_recipe_element.h"

namespace mxdiff::fuzz::device_internal {

inline constexpr int kOverridesPerLaunch = 64;

struct OverrideBatch {
  uint32_t count = 0;
  uint32_t index[kOverridesPerLaunch] = {};
  uint16_t value[kOverridesPerLaunch] = {};
};

// units: elements (activations, scales) or 16-code words (codes).
cudaError_t LaunchGenerate(int kind, const RecipeTables& tables, void* bytes, size_t units);
// Applies the batch in order on one thread; bytes is the tensor's size in bytes.
cudaError_t LaunchOverrides(int kind, const OverrideBatch& batch, void* data, size_t bytes);

}  // namespace mxdiff::fuzz::device_internal
