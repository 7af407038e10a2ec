// The SwiGLU and exp sweeps whose bits are pinned (tests/reference/moe_layer_test.cc) and that the
// device test (tests/kernels/moe_layer_swiglu_test.cc) evaluates on the GPU: the same inputs, the
// same hashes, so the device is tied to the pinned host bits.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/hash.h"

namespace mxdiff::testing {

// The up values of the sweep: every special and boundary class, then a spread of all exponents
// and both signs (256 in all). The gate takes all 65536 values.
inline std::vector<uint16_t> SwigluSweepUps() {
  std::vector<uint16_t> ups = {0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x4900, 0xC900,  // +-10
                               0x48FF, 0x4901, 0xC8FF, 0xC901, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFFFF};
  for (uint32_t i = 0; ups.size() < 256; ++i) ups.push_back(uint16_t(0x0123 + i * 251));
  return ups;
}

// Every 4093rd fp32 bit pattern, specials included: the exp sweep.
inline std::vector<uint32_t> ExpSweepInputs() {
  std::vector<uint32_t> inputs;
  for (uint32_t bits = 0; bits < 0xFFFFFFFFu - 4093; bits += 4093) inputs.push_back(bits);
  for (uint32_t special : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x80000000u, 0x00000001u,
                           0x42B20000u, 0x42B2D4FCu, 0xC2D00000u, 0xC2CFFFFFu, 0x41200000u, 0xC1200000u}) {
    inputs.push_back(special);
  }
  return inputs;
}

// FNV-1a (reference/hash.h) of the sweeps' results (fp16 bits little-endian, then fp32 bits), computed once with
// gcc 12 -O2 (ISO C++20, -ffp-contract=off) and not to move: the clang libFuzzer build checks
// them too, and the device test hashes the GPU's results against the same constants.
inline constexpr uint64_t kSwigluHash = 0x4a2cf7a7e690884dull;
inline constexpr uint64_t kExpHash = 0x673b0f6897d82934ull;

}  // namespace mxdiff::testing
