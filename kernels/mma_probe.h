// Runs raw m8n8k4 instructions on the device for calibration (tools/mxdiff calibrate_command.cc):
// the caller gives every lane's registers, so nothing here assumes a fragment layout.
// CUDA-free header.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace mxdiff {

inline constexpr int kWarpLanes = 32;
inline constexpr int kMmaAElements = 4;  // fp16 A (and B) elements per lane
inline constexpr int kMmaAccumulators = 8;  // fp32 accumulators per lane

struct MmaProbeInput {
  int warps = 0;
  int steps = 0;  // chained instructions per warp: step s's D is step s+1's C
  // [warp][step][lane][4] fp16 bits for A and for B; [warp][lane][8] fp32 bits for the first C.
  std::span<const uint16_t> a;
  std::span<const uint16_t> b;
  std::span<const uint32_t> c;
};

struct MmaProbeResult {
  std::vector<uint32_t> d;  // [warp][lane][8] fp32 bits after the last step
  int device_arch = 0;      // __CUDA_ARCH__ of the code that ran (750, 900, ...)
};

// Unavailable without a device, InvalidArgument for sizes that disagree with warps x steps.
absl::StatusOr<MmaProbeResult> RunMmaProbe(const MmaProbeInput& input, int device = 0);

}  // namespace mxdiff
