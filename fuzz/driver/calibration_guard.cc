#include "fuzz/driver/calibration_guard.h"

#include <array>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "kernels/mma_fragment_layout.h"
#include "kernels/mma_probe.h"
#include "reference/fp16.h"

namespace mxdiff::fuzz {
namespace {

constexpr int kProbeWarps = 64;

// The lane of quad-pair q that holds fragment row (or column) `index`.
int LaneOf(int quad_pair, int index) {
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    if (QuadPair(lane) == quad_pair && FragmentIndex(lane) == index) return lane;
  }
  return -1;
}

uint16_t ProbeF16(std::mt19937_64& rng) {
  const uint64_t bits = rng();
  if (bits % 16 == 0) return uint16_t(bits >> 8);  // anything, specials included
  return uint16_t(((bits >> 8) & 0x8000) | ((8 + (bits >> 20) % 16) << 10) | ((bits >> 32) & 0x3FF));
}

struct ProbeStep {
  std::array<uint16_t, 4> a{}, b{};
  uint32_t c = 0, device = 0, model = 0;
};

}  // namespace

absl::StatusOr<Calibration> CalibrateDevice(int device) {
  std::mt19937_64 rng(20260);
  std::vector<uint16_t> a(size_t(kProbeWarps) * kWarpLanes * kMmaAElements);
  std::vector<uint16_t> b(a.size());
  std::vector<uint32_t> c(size_t(kProbeWarps) * kWarpLanes * kMmaAccumulators);
  for (uint16_t& value : a) value = ProbeF16(rng);
  for (uint16_t& value : b) value = ProbeF16(rng);
  for (uint32_t& value : c) value = f32_to_bits(f16_to_f32(ProbeF16(rng)));
  // Warp 0, quad-pair 0, row 0 x column 0: 2^14 + 1.25 x 2^-10 - 2^14 + 1, where the FMA chain
  // rounds the small term up, the exact sum keeps it and the V100 truncation drops it.
  const uint16_t crafted[4] = {0x7400, 0x1500, 0xF400, 0x3C00};
  for (int i = 0; i < 4; ++i) {
    a[size_t(LaneOf(0, 0)) * 4 + i] = crafted[i];
    b[size_t(LaneOf(0, 0)) * 4 + i] = 0x3C00;
  }
  c[size_t(LaneOf(0, 0)) * kMmaAccumulators + 0] = 0;
  MmaProbeInput input{kProbeWarps, 1, a, b, c};
  absl::StatusOr<MmaProbeResult> result = RunMmaProbe(input, device);
  if (!result.ok()) return result.status();

  std::array<std::optional<ProbeStep>, kStepModelCount> first_mismatch;
  for (int warp = 0; warp < kProbeWarps; ++warp) {
    const size_t base = size_t(warp) * kWarpLanes;
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      const int quad_pair = QuadPair(lane);
      for (int i = 0; i < kMmaAccumulators; ++i) {
        const uint16_t* a_row = &a[(base + size_t(LaneOf(quad_pair, AccumulatorRow(lane, i)))) * 4];
        const uint16_t* b_col = &b[(base + size_t(LaneOf(quad_pair, AccumulatorColumn(lane, i)))) * 4];
        const size_t slot = (base + size_t(lane)) * kMmaAccumulators + size_t(i);
        for (int m = 0; m < kStepModelCount; ++m) {
          if (first_mismatch[m]) continue;
          const uint32_t expected = Step(StepModel(m), c[slot], std::span<const uint16_t, 4>(a_row, 4),
                                         std::span<const uint16_t, 4>(b_col, 4));
          if (expected == result->d[slot]) continue;
          ProbeStep step;
          step.c = c[slot];
          step.device = result->d[slot];
          step.model = expected;
          std::copy(a_row, a_row + 4, step.a.begin());
          std::copy(b_col, b_col + 4, step.b.begin());
          first_mismatch[m] = step;
        }
      }
    }
  }
  Calibration calibration{StepModel::kSm90Emulated, ""};
  calibration.report = fmt::format("mma probe (sm_{}): {} steps; matching models:", result->device_arch / 10,
                                   kProbeWarps * kWarpLanes * kMmaAccumulators);
  std::optional<StepModel> matched;
  std::string evidence;
  for (int m = 0; m < kStepModelCount; ++m) {
    if (!first_mismatch[m]) {
      calibration.report += fmt::format(" {}", StepModelName(StepModel(m)));
      // sm90-emulated and its FTZ twin give the same bits on fuzz_gemm's GEMMs (products of
      // fp16 values are fp32 normals and the accumulator starts at +0): the first match is taken.
      if (!matched) matched = StepModel(m);
      continue;
    }
    const ProbeStep& step = *first_mismatch[m];
    evidence += fmt::format("  {}: a {:04x} {:04x} {:04x} {:04x}, b {:04x} {:04x} {:04x} {:04x}, c {:08x}: "
                            "device 0x{:08x}, model 0x{:08x}\n",
                            StepModelName(StepModel(m)), step.a[0], step.a[1], step.a[2], step.a[3], step.b[0],
                            step.b[1], step.b[2], step.b[3], step.c, step.device, step.model);
  }
  calibration.report += "\n";
  if (!matched) {
    return absl::FailedPreconditionError(
        fmt::format("calibration: the device's m8n8k4 matches no step model\n{}first mismatching step per model:\n{}",
                    calibration.report, evidence));
  }
  calibration.model = *matched;
  return calibration;
}

}  // namespace mxdiff::fuzz
