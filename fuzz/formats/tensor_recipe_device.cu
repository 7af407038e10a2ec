// The device materialization's kernels: the generator of tensor_recipe_element.h per element (or
// per 16 codes), then the overrides in order on one thread (a later one at the same index wins).
#include "fuzz/formats/tensor_recipe_device_launch.h"

namespace mxdiff::fuzz::device_internal {
namespace {

constexpr int kThreads = 256;

__global__ void GenerateKernel(int kind, RecipeTables tables, void* bytes, size_t units) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < units; i += size_t(gridDim.x) * blockDim.x) {
    if (kind == int(TensorKind::kActivations)) {
      static_cast<uint16_t*>(bytes)[i] = recipe_element::Activation(tables, i);
    } else if (kind == int(TensorKind::kCodes)) {
      static_cast<uint64_t*>(bytes)[i] = recipe_element::CodeWord(tables, i);  // little-endian: code 2b low
    } else {
      static_cast<uint8_t*>(bytes)[i] = recipe_element::Scale(tables, i);
    }
  }
}

__global__ void OverridesKernel(int kind, OverrideBatch batch, uint8_t* bytes, size_t size) {
  for (uint32_t o = 0; o < batch.count; ++o) {
    const uint64_t index = batch.index[o];
    const uint16_t value = batch.value[o];
    if (kind == int(TensorKind::kActivations)) {
      if (index < size / 2) {
        bytes[2 * index] = uint8_t(value);
        bytes[2 * index + 1] = uint8_t(value >> 8);
      }
    } else if (kind == int(TensorKind::kCodes)) {
      if (index / 2 < size) {
        uint8_t& byte = bytes[index / 2];
        byte = index % 2 == 0 ? uint8_t((byte & 0xF0) | (value & 0xF)) : uint8_t((byte & 0x0F) | (value << 4));
      }
    } else if (index < size) {
      bytes[index] = uint8_t(value);
    }
  }
}

}  // namespace

cudaError_t LaunchGenerate(int kind, const RecipeTables& tables, void* bytes, size_t units) {
  if (units == 0) return cudaSuccess;
  const size_t blocks = (units + kThreads - 1) / kThreads;
  GenerateKernel<<<unsigned(blocks < 65535 * 16 ? blocks : 65535 * 16), kThreads>>>(kind, tables, bytes, units);
  return cudaGetLastError();
}

cudaError_t LaunchOverrides(int kind, const OverrideBatch& batch, void* data, size_t bytes) {
  if (batch.count == 0) return cudaSuccess;
  OverridesKernel<<<1, 1>>>(kind, batch, static_cast<uint8_t*>(data), bytes);
  return cudaGetLastError();
}

}  // namespace mxdiff::fuzz::device_internal
