// The MoE layer's shared-header arithmetic evaluated by a plain CUDA kernel (compiled with
// nvcc's default flags, contraction on: the header's explicit operations must hold regardless),
// so that the test can compare it with the same functions on the host, bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace mxdiff::testing {

// swiglu_f16(gate, ups[u], limit) for every gate 0..65535 and every u: out[gate * ups.size() + u].
absl::StatusOr<std::vector<uint16_t>> DeviceSwigluSweep(std::span<const uint16_t> ups, float limit);

// swiglu_exp and swiglu_silu of each fp32 bit pattern.
absl::StatusOr<std::vector<uint32_t>> DeviceExp(std::span<const uint32_t> inputs);
absl::StatusOr<std::vector<uint32_t>> DeviceSilu(std::span<const uint32_t> inputs);

// moe_combine_slot(acc[i], weight[i], y[i]) and moe_combine_shared(acc[i], y[i]) interleaved:
// out[2 i], out[2 i + 1].
absl::StatusOr<std::vector<uint32_t>> DeviceCombine(std::span<const uint32_t> acc, std::span<const uint32_t> weight,
                                                    std::span<const uint16_t> y);

}  // namespace mxdiff::testing
