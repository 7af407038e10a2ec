#include "fuzz/calibration_guard.h"

#include <random>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "kernels/mma_probe.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {
namespace {

constexpr int kProbeWarps = 64;

// Lanes of quad-pair q whose r (lane % 4 + 4 * (lane >= 16)) is `r` (FACTS.md §5).
int LaneOf(int quad_pair, int r) { return 4 * quad_pair + (r % 4) + (r >= 4 ? 16 : 0); }

uint16_t ProbeF16(std::mt19937_64& rng) {
  const uint64_t bits = rng();
  if (bits % 16 == 0) return uint16_t(bits >> 8);  // anything, specials included
  return uint16_t(((bits >> 8) & 0x8000) | ((8 + (bits >> 20) % 16) << 10) | ((bits >> 32) & 0x3FF));
}

// Which models reproduce every accumulator of every probe warp, as a bit set over StepModel.
absl::StatusOr<unsigned> ProbeModels(int device, std::string& report) {
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
  unsigned matching = (1u << kStepModelCount) - 1;
  for (int warp = 0; warp < kProbeWarps; ++warp) {
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      const int quad_pair = (lane % 16) / 4;
      for (int i = 0; i < kMmaAccumulators; ++i) {
        const int row = (lane & 1) + (i & 2) + 4 * (lane >= 16);
        const int col = (i & 4) + (lane & 2) + (i & 1);
        const size_t base = size_t(warp) * kWarpLanes;
        const uint16_t* a_row = &a[(base + size_t(LaneOf(quad_pair, row))) * 4];
        const uint16_t* b_col = &b[(base + size_t(LaneOf(quad_pair, col))) * 4];
        const size_t slot = (base + size_t(lane)) * kMmaAccumulators + size_t(i);
        for (int m = 0; m < kStepModelCount; ++m) {
          const uint32_t expected = Step(StepModel(m), c[slot], std::span<const uint16_t, 4>(a_row, 4),
                                         std::span<const uint16_t, 4>(b_col, 4));
          if (expected != result->d[slot]) matching &= ~(1u << m);
        }
      }
    }
  }
  report += fmt::format("mma probe (sm_{}): {} steps; matching models:", result->device_arch / 10,
                        kProbeWarps * kWarpLanes * kMmaAccumulators);
  for (int m = 0; m < kStepModelCount; ++m) {
    if (matching & (1u << m)) report += fmt::format(" {}", StepModelName(StepModel(m)));
  }
  report += "\n";
  return matching;
}

// One group, `rows` rows, n = 8, k = 64, scale 2^0 (admitted), weights code 2 (1.0) in the
// crafted case and random codes otherwise.
struct KnownCase {
  std::vector<int32_t> row_offsets;
  std::vector<uint16_t> activations;
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;
};

KnownCase MakeKnownCase(bool crafted, std::mt19937_64& rng) {
  constexpr int kRows = 3, kN = 8, kK = 64;
  KnownCase known{{0, kRows}, std::vector<uint16_t>(kRows * kK), std::vector<uint8_t>(kN * kK / 2),
                  std::vector<uint8_t>(kN * kK / 32, 127)};
  if (crafted) {
    const uint16_t values[4] = {0x7400, 0x1500, 0xF400, 0x3C00};
    for (int r = 0; r < kRows; ++r) {
      for (int i = 0; i < 4; ++i) known.activations[size_t(r) * kK + size_t(i)] = values[i];
    }
    for (uint8_t& byte : known.codes) byte = 0x22;  // two codes of 1.0
    return known;
  }
  for (uint16_t& value : known.activations) value = ProbeF16(rng);
  for (uint8_t& byte : known.codes) byte = uint8_t(rng());
  for (uint8_t& raw : known.scales) raw = uint8_t(113 + rng() % 16);
  return known;
}

}  // namespace

absl::StatusOr<Calibration> CalibrateDevice(GemmRunner& runner, int device) {
  Calibration calibration{StepModel::kSm90Emulated, ""};
  absl::StatusOr<unsigned> matching = ProbeModels(device, calibration.report);
  if (!matching.ok()) return matching.status();
  if (*matching == 0) {
    return absl::FailedPreconditionError("calibration: the device's m8n8k4 matches no step model\n" +
                                         calibration.report);
  }
  // sm90-emulated and its FTZ twin give the same bits on this GEMM (products of fp16 values
  // are fp32 normals and the accumulator starts at +0), so the first match is taken.
  for (int m = 0; m < kStepModelCount; ++m) {
    if (*matching & (1u << m)) {
      calibration.model = StepModel(m);
      break;
    }
  }
  std::mt19937_64 rng(7);
  for (const Tactic& tactic : runner.registry().OrdinaryTactics()) {
    for (int variant = 0; variant < 3; ++variant) {
      const KnownCase known = MakeKnownCase(variant == 0, rng);
      Tactic run_tactic = tactic;
      run_tactic.splits = variant == 2 ? 2 : 1;
      absl::StatusOr<std::unique_ptr<PreparedLayer>> layer = runner.Prepare(1, 8, 64, known.codes, known.scales);
      if (!layer.ok()) return layer.status();
      std::vector<uint16_t> device_output(known.activations.size() / 64 * 8, 0x7E5A), expected;
      RunRequest request;
      request.transform = TransformRequest::kOrdinary;
      request.tactic = run_tactic;
      absl::StatusOr<Route> route = runner.Run(**layer, known.row_offsets, known.activations, device_output, request);
      if (!route.ok()) return route.status();
      GroupedProblem problem{1, 8, 64, known.row_offsets, known.activations, known.codes, known.scales};
      ReferenceOptions options;
      options.model = calibration.model;
      options.tactic = run_tactic;
      if (absl::Status status = ReferenceGemm(problem, options, expected); !status.ok()) return status;
      if (device_output != expected) {
        return absl::FailedPreconditionError(fmt::format(
            "calibration: the ordinary kernel with tactic {} disagrees with the reference ({}) on a known case "
            "(first element 0x{:04x} vs 0x{:04x})\n{}",
            TacticName(run_tactic), StepModelName(calibration.model), device_output[0], expected[0],
            calibration.report));
      }
    }
    calibration.report += fmt::format("kernel path {}: 3 known cases match {}\n", TacticName(tactic),
                                      StepModelName(calibration.model));
  }
  if (absl::Status health = runner.CheckDevice(); !health.ok()) return health;
  return calibration;
}

}  // namespace mxdiff::fuzz
