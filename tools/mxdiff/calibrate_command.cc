// `mxdiff calibrate`: on a GPU, re-derive the m8n8k4 fragment layout from one-hot probes,
// run targeted and random chains of steps through the device, and report which step model of
// the reference reproduces this device and build (or the mismatches, with bits). GPU fuzzing
// runs it first as a guard against toolkit or driver drift (--expect=MODEL).
//
//   mxdiff calibrate [--expect=MODEL] [--write=FILE] [--seed=N] [--warps=N] [--steps=N]
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "fmt/core.h"
#include "reference/fp16.h"
#include "reference/step_model.h"
#include "reference/vector_file.h"
#include "tools/mxdiff/commands.h"

#if MXDIFF_HAVE_CUDA
#include "tools/mxdiff/gpu_presence.h"
#include "kernels/mma_fragment_layout.h"
#include "kernels/mma_probe.h"
#endif

ABSL_FLAG(std::string, expect, "", "calibrate: exit 1 unless this step model matches every vector");
ABSL_FLAG(std::string, write, "", "calibrate: write the vectors it ran to this CSV file");
ABSL_FLAG(uint64_t, seed, 0, "calibrate: random seed (0: a fresh one, printed)");
ABSL_FLAG(int, warps, 512, "calibrate: warps of random vectors per class (256 outputs each)");
ABSL_FLAG(int, steps, 4, "calibrate: m8n8k4 steps per chain (vector K = 4 x steps)");

namespace mxdiff::cli {

#if !MXDIFF_HAVE_CUDA

int CalibrateCommand(std::span<const std::string_view>) {
  fmt::print(stderr, "mxdiff calibrate: this build has no CUDA (configure where nvcc is found, MXDIFF_CUDA=ON)\n");
  return kExitBadInput;
}

#else

namespace {

constexpr uint16_t kF16One = 0x3C00;

// Value classes a chain's operands are drawn from.
// kSparse: mostly zero operands, so special accumulators (fp32 subnormals, -0, Inf) reach the
// result nearly untouched: this is what tells a flush-to-zero build apart.
enum class Draw { kSpecial, kSparse, kModerate, kAnyBits };

constexpr uint16_t kSpecialHalves[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                       0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x3555, 0x1400, 0x0200};
constexpr uint32_t kSpecialFloats[] = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
                                       0x00800000, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                                       0x7F800000, 0xFF800000, 0x7FC00000, 0x33800000, 0x4B800000, 0x4F800000};

uint16_t DrawHalf(std::mt19937_64& rng, Draw draw) {
  switch (draw) {
    case Draw::kSparse:
      if (rng() % 8 != 0) return (rng() & 1) ? 0x8000 : 0x0000;
      [[fallthrough]];
    case Draw::kSpecial:
      if (rng() % 2) return kSpecialHalves[rng() % std::size(kSpecialHalves)];
      [[fallthrough]];
    case Draw::kModerate:
      return uint16_t(((rng() & 1) << 15) | ((1 + rng() % 29) << 10) | (rng() & 0x3FF));
    case Draw::kAnyBits:
      return uint16_t(rng());
  }
  return 0;
}

uint32_t DrawFloat(std::mt19937_64& rng, Draw draw) {
  switch (draw) {
    case Draw::kSparse:
    case Draw::kSpecial:
      if (rng() % 2) return kSpecialFloats[rng() % std::size(kSpecialFloats)];
      [[fallthrough]];
    case Draw::kModerate:
      return uint32_t(((rng() & 1) << 31) | ((100 + rng() % 56) << 23) | (rng() & 0x7FFFFF));
    case Draw::kAnyBits:
      return uint32_t(rng());
  }
  return 0;
}

struct LayoutReport {
  int probes = 0;
  int mismatches = 0;
  std::vector<std::string> details;
};

// One probe per A register (lane L, register i): A = 1 there and 0 elsewhere, every B register
// a distinct small integer, C = 0. D then holds, in exactly the registers of the row that A
// register feeds, the ids of the B registers it multiplies: the whole contraction structure,
// compared here against mma_fragment_layout.h.
absl::StatusOr<LayoutReport> RediscoverLayout(int device) {
  constexpr int kProbes = kWarpLanes * kMmaAElements;
  std::vector<uint16_t> a(size_t(kProbes) * kWarpLanes * 4, 0), b(a.size());
  std::vector<uint32_t> c(size_t(kProbes) * kWarpLanes * 8, 0);
  for (int probe = 0; probe < kProbes; ++probe) {
    a[(size_t(probe) * kWarpLanes + probe / 4) * 4 + probe % 4] = kF16One;
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      for (int j = 0; j < 4; ++j) b[(size_t(probe) * kWarpLanes + lane) * 4 + j] = f32_to_f16_rne(float(1 + lane * 4 + j));
    }
  }
  absl::StatusOr<MmaProbeResult> result =
      RunMmaProbe(MmaProbeInput{.warps = kProbes, .steps = 1, .a = a, .b = b, .c = c}, device);
  if (!result.ok()) return result.status();
  LayoutReport report;
  report.probes = kProbes;
  for (int probe = 0; probe < kProbes; ++probe) {
    const int lane = probe / 4;
    const int k = probe % 4;
    const int q = QuadPair(lane);
    const int row = FragmentIndex(lane);
    for (int out_lane = 0; out_lane < kWarpLanes; ++out_lane) {
      for (int i = 0; i < 8; ++i) {
        const float got = bits_to_f32(result->d[(size_t(probe) * kWarpLanes + out_lane) * 8 + i]);
        float expected = 0;
        if (QuadPair(out_lane) == q && AccumulatorRow(out_lane, i) == row) {
          const int column = AccumulatorColumn(out_lane, i);
          for (int b_lane = 0; b_lane < kWarpLanes; ++b_lane) {
            if (QuadPair(b_lane) == q && FragmentIndex(b_lane) == column) expected = float(1 + b_lane * 4 + k);
          }
        }
        if (got != expected) {
          ++report.mismatches;
          if (report.details.size() < 8) {
            const int id = int(got);
            report.details.push_back(fmt::format(
                "A lane {} reg {}: D lane {} reg {} = {} (B lane {} reg {}), the assumed layout says {}", lane, k,
                out_lane, i, got, got > 0 ? (id - 1) / 4 : -1, got > 0 ? (id - 1) % 4 : -1, expected));
          }
        }
      }
    }
  }
  return report;
}

struct VectorClass {
  const char* name;
  Draw operands;
  Draw accumulator;
  int first_row = 0;  // into the vector list
  int rows = 0;
};

// Runs `warps` warps of `steps`-step chains with operands drawn per class; every output
// element becomes one vector row (its A row, its B column, its C, the device's D).
absl::Status RunClass(std::mt19937_64& rng, VectorClass& vector_class, int warps, int steps, int device,
                      std::vector<VectorRow>& rows, int* device_arch) {
  const int k = 4 * steps;
  // Matrix form per warp and quad-pair: A[8][k], B[8 columns][k], C[8][8].
  std::vector<uint16_t> a_matrix(size_t(warps) * 4 * 8 * k), b_matrix(a_matrix.size());
  std::vector<uint32_t> c_matrix(size_t(warps) * 4 * 64);
  for (uint16_t& x : a_matrix) x = DrawHalf(rng, vector_class.operands);
  for (uint16_t& x : b_matrix) x = DrawHalf(rng, vector_class.operands);
  for (uint32_t& x : c_matrix) x = DrawFloat(rng, vector_class.accumulator);
  auto operand = [&](const std::vector<uint16_t>& m, int w, int q, int index, int kk) -> uint16_t {
    return m[((size_t(w) * 4 + q) * 8 + index) * k + kk];
  };
  std::vector<uint16_t> a(size_t(warps) * steps * kWarpLanes * 4), b(a.size());
  std::vector<uint32_t> c(size_t(warps) * kWarpLanes * 8);
  for (int w = 0; w < warps; ++w) {
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      const int q = QuadPair(lane);
      for (int s = 0; s < steps; ++s) {
        for (int i = 0; i < 4; ++i) {
          const size_t slot = ((size_t(w) * steps + s) * kWarpLanes + lane) * 4 + i;
          a[slot] = operand(a_matrix, w, q, FragmentIndex(lane), 4 * s + i);
          b[slot] = operand(b_matrix, w, q, FragmentIndex(lane), 4 * s + i);
        }
      }
      for (int i = 0; i < 8; ++i) {
        c[(size_t(w) * kWarpLanes + lane) * 8 + i] =
            c_matrix[(size_t(w) * 4 + q) * 64 + AccumulatorRow(lane, i) * 8 + AccumulatorColumn(lane, i)];
      }
    }
  }
  absl::StatusOr<MmaProbeResult> result =
      RunMmaProbe(MmaProbeInput{.warps = warps, .steps = steps, .a = a, .b = b, .c = c}, device);
  if (!result.ok()) return result.status();
  *device_arch = result->device_arch;
  vector_class.first_row = int(rows.size());
  for (int w = 0; w < warps; ++w) {
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      const int q = QuadPair(lane);
      for (int i = 0; i < 8; ++i) {
        const int row = AccumulatorRow(lane, i);
        const int column = AccumulatorColumn(lane, i);
        VectorRow vector;
        for (int kk = 0; kk < k; ++kk) {
          vector.a.push_back(operand(a_matrix, w, q, row, kk));
          vector.b.push_back(operand(b_matrix, w, q, column, kk));
        }
        vector.c = c_matrix[(size_t(w) * 4 + q) * 64 + row * 8 + column];
        vector.d = result->d[(size_t(w) * kWarpLanes + lane) * 8 + i];
        rows.push_back(std::move(vector));
      }
    }
  }
  vector_class.rows = int(rows.size()) - vector_class.first_row;
  return absl::OkStatus();
}

std::string Hex(std::span<const uint16_t> values) {
  std::string text;
  for (uint16_t v : values) text += fmt::format("{}{:04x}", text.empty() ? "" : " ", v);
  return text;
}

struct CalibrateFlags {
  int warps = 0;
  int steps = 0;
  std::optional<StepModel> expected_model;
};

// The command's flags, checked; false (after its one-line message) on bad input.
bool ReadCalibrateFlags(std::span<const std::string_view> args, CalibrateFlags& flags) {
  if (!args.empty()) {
    fmt::print(stderr, "mxdiff calibrate: unexpected argument '{}' (it takes flags only)\n", args[0]);
    return false;
  }
  flags.warps = absl::GetFlag(FLAGS_warps);
  flags.steps = absl::GetFlag(FLAGS_steps);
  if (flags.warps < 1 || flags.warps > 65536 || flags.steps < 1 || flags.steps > 64) {
    fmt::print(stderr, "mxdiff calibrate: --warps must be 1..65536 and --steps 1..64 (got {} and {})\n", flags.warps,
               flags.steps);
    return false;
  }
  if (const std::string name = absl::GetFlag(FLAGS_expect); !name.empty()) {
    flags.expected_model = ParseStepModel(name);
    if (!flags.expected_model) {
      fmt::print(stderr, "mxdiff calibrate: unknown step model '{}' for --expect\n", name);
      return false;
    }
  }
  return true;
}

struct ModelMatches {
  std::vector<StepModel> matching;  // the models that reproduce every vector
  StepModel closest = StepModel::kSm90Emulated;
};

// Every step model against the device's vectors: a table of matched vectors per class.
ModelMatches MatchModels(std::span<const VectorClass> classes, const std::vector<VectorRow>& rows) {
  ModelMatches result;
  fmt::print("{:<20}", "model");
  for (const VectorClass& vector_class : classes) fmt::print(" {:>20}", vector_class.name);
  fmt::print("\n");
  size_t closest_failures = SIZE_MAX;
  for (int m = 0; m < kStepModelCount; ++m) {
    const StepModel model = StepModel(m);
    size_t failures = 0;
    fmt::print("{:<20}", StepModelName(model));
    for (const VectorClass& vector_class : classes) {
      int matched = 0;
      for (int r = vector_class.first_row; r < vector_class.first_row + vector_class.rows; ++r) {
        matched += VectorResultMatches(EvaluateVectorRow(model, rows[r]), rows[r].d) ? 1 : 0;
      }
      failures += size_t(vector_class.rows - matched);
      fmt::print(" {:>20}", fmt::format("{}/{}", matched, vector_class.rows));
    }
    fmt::print("\n");
    if (failures == 0) result.matching.push_back(model);
    if (failures < closest_failures) {
      closest_failures = failures;
      result.closest = model;
    }
  }
  return result;
}

// The matching models, or the first mismatches of the closest one.
void PrintMatches(const ModelMatches& matches, const std::vector<VectorRow>& rows) {
  if (!matches.matching.empty()) {
    std::string names;
    for (StepModel model : matches.matching) {
      names += fmt::format("{}{}", names.empty() ? "" : ", ", StepModelName(model));
    }
    fmt::print("matching model: {}\n", names);
    return;
  }
  fmt::print("no model matches; first mismatches of the closest, {}:\n", StepModelName(matches.closest));
  int shown = 0;
  for (const VectorRow& row : rows) {
    const uint32_t model_d = EvaluateVectorRow(matches.closest, row);
    if (VectorResultMatches(model_d, row.d)) continue;
    fmt::print("  a [{}] b [{}] c {:08x}: device {:08x}, model {:08x}\n", Hex(row.a), Hex(row.b), row.c, row.d,
               model_d);
    if (++shown == 8) break;
  }
}

// --write=FILE: the vectors as a vector file; false (after its message) when it cannot be written.
bool WriteVectors(const std::string& path, const std::vector<VectorRow>& rows, int device_arch, uint64_t seed,
                  int steps) {
  VectorFile file;
  file.name = path;
  file.k = 4 * steps;
  file.comments.push_back(fmt::format("mxdiff calibrate: device code sm_{}, seed {}, {} m8n8k4 steps per row",
                                      device_arch / 10, seed, steps));
  file.comments.push_back("columns a0..a(K-1), b0..b(K-1) fp16 bits, c and d fp32 bits (d: what the device produced)");
  file.rows = rows;
  if (absl::Status status = WriteVectorFile(path, file); !status.ok()) {
    fmt::print(stderr, "mxdiff calibrate: {}\n", status.ToString());
    return false;
  }
  fmt::print("wrote {} vectors to {}\n", rows.size(), path);
  return true;
}

}  // namespace

int CalibrateCommand(std::span<const std::string_view> args) {
  CalibrateFlags flags;
  if (!ReadCalibrateFlags(args, flags)) return kExitBadInput;
  constexpr int kDevice = 0;
  if (absl::Status gpu = RequireGpu(kDevice); !gpu.ok()) {  // before any output: no GPU is one line
    fmt::print(stderr, "mxdiff calibrate: {}\n", std::string(gpu.message()));
    return kExitBadInput;
  }
  uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed == 0) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  fmt::print("calibrate: seed {} (replay with --seed={})\n", seed, seed);

  absl::StatusOr<LayoutReport> layout = RediscoverLayout(kDevice);
  if (!layout.ok()) {
    fmt::print(stderr, "mxdiff calibrate: {}\n", layout.status().ToString());
    return layout.status().code() == absl::StatusCode::kUnavailable ? kExitBadInput : kExitCheckFailed;
  }
  fmt::print("layout: {} one-hot probes x 256 accumulators, {} differ from the PTX m8n8k4 layout the kernels use\n",
             layout->probes, layout->mismatches);
  for (const std::string& detail : layout->details) fmt::print("  {}\n", detail);

  std::mt19937_64 rng(seed);
  VectorClass classes[] = {{"targeted specials", Draw::kSpecial, Draw::kSpecial},
                           {"sparse, special c", Draw::kSparse, Draw::kSparse},
                           {"moderate chains", Draw::kModerate, Draw::kModerate},
                           {"random bits", Draw::kAnyBits, Draw::kAnyBits}};
  std::vector<VectorRow> rows;
  int device_arch = 0;
  for (VectorClass& vector_class : classes) {
    if (absl::Status status = RunClass(rng, vector_class, flags.warps, flags.steps, kDevice, rows, &device_arch);
        !status.ok()) {
      fmt::print(stderr, "mxdiff calibrate: {}: {}\n", vector_class.name, status.ToString());
      return kExitCheckFailed;
    }
  }
  fmt::print("device code sm_{}, {} steps per chain, {} vectors\n", device_arch / 10, flags.steps, rows.size());
  const ModelMatches matches = MatchModels(classes, rows);
  PrintMatches(matches, rows);
  if (const std::string path = absl::GetFlag(FLAGS_write); !path.empty()) {
    if (!WriteVectors(path, rows, device_arch, seed, flags.steps)) return kExitBadInput;
  }

  if (layout->mismatches > 0) return kExitCheckFailed;
  if (flags.expected_model) {
    const bool found =
        std::find(matches.matching.begin(), matches.matching.end(), *flags.expected_model) != matches.matching.end();
    fmt::print("expected {}: {}\n", StepModelName(*flags.expected_model), found ? "matches" : "DOES NOT MATCH");
    return found ? kExitOk : kExitCheckFailed;
  }
  return matches.matching.empty() ? kExitCheckFailed : kExitOk;
}

#endif  // MXDIFF_HAVE_CUDA

}  // namespace mxdiff::cli
