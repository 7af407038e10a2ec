// Materializing a tensor recipe (tensor_recipe.h) on a CUDA device: the counter-based generator
// runs there, one thread per element (activations, scales) or per 16 codes, from the same
// host/device element functions as the host's check (tensor_recipe_element.h), and the overrides
// are applied after it in order, as on the host. So a large case's tensors need not cross PCIe or
// the host allocator. tests/fuzz/device_materialize_test.cc (GPU) compares the bytes with the
// host's Materialize* bit for bit. CUDA-free header; the library (mxdiff_fuzz_device) exists only
// where nvcc is found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "fuzz/formats/tensor_recipe.h"

namespace mxdiff::fuzz {

// Whether a CUDA device is there; `why` (optional) says why not.
bool DeviceMaterializationAvailable(std::string* why = nullptr);

// Fills `device_bytes` (device memory of `byte_count` bytes on the current device, laid out as
// the host's Materialize*: fp16 little-endian, packed codes low nibble first, scale bytes) from
// the recipe, overrides included. byte_count: even for activations, a multiple of 8 for codes.
// Errors: InvalidArgument for a bad size, Unavailable without a device, Internal for a CUDA error.
absl::Status MaterializeOnDevice(TensorKind kind, const TensorRecipe& recipe, void* device_bytes, size_t byte_count);

// The same into device memory of its own, copied back into `out` (ResourceExhausted when the
// device memory runs out).
absl::Status MaterializeOnDeviceToHost(TensorKind kind, const TensorRecipe& recipe, std::span<uint8_t> out);

}  // namespace mxdiff::fuzz
