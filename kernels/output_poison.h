// The output poison: what GemmRunner::Run, the MoE layer's poisoned stages and the bench's arms
// fill a device output with before a launch, so that an element no kernel wrote shows. Header
// only and CUDA-free (the bench's CUDA-free bit comparison reads it too).
#pragma once

#include <cstdint>

namespace mxdiff {

// Every byte 0xFF: fp16 0xFFFF, a NaN that no kernel writes (every NaN a kernel produces is the
// canonical 0x7FFF).
inline constexpr uint8_t kRunnerPoisonByte = 0xFF;
inline constexpr uint16_t kRunnerOutputPoison = uint16_t(kRunnerPoisonByte * 0x101u);

}  // namespace mxdiff
