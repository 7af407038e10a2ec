// The probe kernel against the fragment layout the GEMM kernels assume and the step model.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/mma_fragment_layout.h"
#include "kernels/mma_probe.h"
#include "reference/fp16.h"
#include "reference/step_model.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

// Operands in matrix form: per warp, per quad-pair, A[8][4*steps], B[4*steps][8], C and D [8][8].
struct Matrices {
  int warps = 0;
  int steps = 0;
  std::vector<uint16_t> a = {}, b = {};  // [warp][q][row or column][k]
  std::vector<uint32_t> c = {};          // [warp][q][row][column]

  size_t OperandIndex(int warp, int q, int index, int k) const {
    return ((size_t(warp) * 4 + q) * 8 + index) * (4 * steps) + k;
  }
  size_t TileIndex(int warp, int q, int row, int column) const {
    return ((size_t(warp) * 4 + q) * 8 + row) * 8 + column;
  }
};

// Matrix form -> per-lane registers through the layout under test, run, and back.
absl::StatusOr<std::vector<uint32_t>> RunThroughLayout(const Matrices& m, int* device_arch) {
  std::vector<uint16_t> a(size_t(m.warps) * m.steps * 32 * 4), b(a.size());
  std::vector<uint32_t> c(size_t(m.warps) * 32 * 8);
  for (int w = 0; w < m.warps; ++w) {
    for (int lane = 0; lane < 32; ++lane) {
      const int q = QuadPair(lane);
      for (int s = 0; s < m.steps; ++s) {
        for (int i = 0; i < 4; ++i) {
          const size_t slot = ((size_t(w) * m.steps + s) * 32 + lane) * 4 + i;
          a[slot] = m.a[m.OperandIndex(w, q, FragmentIndex(lane), 4 * s + i)];
          b[slot] = m.b[m.OperandIndex(w, q, FragmentIndex(lane), 4 * s + i)];
        }
      }
      for (int i = 0; i < 8; ++i) {
        c[(size_t(w) * 32 + lane) * 8 + i] = m.c[m.TileIndex(w, q, AccumulatorRow(lane, i), AccumulatorColumn(lane, i))];
      }
    }
  }
  absl::StatusOr<MmaProbeResult> result =
      RunMmaProbe(MmaProbeInput{.warps = m.warps, .steps = m.steps, .a = a, .b = b, .c = c});
  if (!result.ok()) return result.status();
  *device_arch = result->device_arch;
  std::vector<uint32_t> d(m.c.size());
  for (int w = 0; w < m.warps; ++w) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 8; ++i) {
        d[m.TileIndex(w, QuadPair(lane), AccumulatorRow(lane, i), AccumulatorColumn(lane, i))] =
            result->d[(size_t(w) * 32 + lane) * 8 + i];
      }
    }
  }
  return d;
}

class MmaProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<uint16_t> a(32 * 4), b(32 * 4);
    const std::vector<uint32_t> c(32 * 8);
    absl::StatusOr<MmaProbeResult> probe = RunMmaProbe(MmaProbeInput{.warps = 1, .steps = 1, .a = a, .b = b, .c = c});
    if (probe.status().code() == absl::StatusCode::kUnavailable) {
      GTEST_SKIP() << "no CUDA device: " << probe.status();
    }
    ASSERT_TRUE(probe.ok()) << probe.status();
  }
};

TEST_F(MmaProbeTest, SmallIntegerProductsFollowTheAssumedLayout) {
  std::mt19937_64 rng(TestSeed("MmaProbeTest.Layout"));
  Matrices m{.warps = 8, .steps = 3};
  m.a.resize(size_t(m.warps) * 4 * 8 * 4 * m.steps);
  m.b.resize(m.a.size());
  m.c.resize(size_t(m.warps) * 4 * 64);
  // Integers -8..7 and a small integer C: every model computes these exactly.
  for (uint16_t& x : m.a) x = f32_to_f16_rne(float(int(rng() % 16) - 8));
  for (uint16_t& x : m.b) x = f32_to_f16_rne(float(int(rng() % 16) - 8));
  for (uint32_t& x : m.c) x = f32_to_bits(float(int(rng() % 200) - 100));
  int arch = 0;
  absl::StatusOr<std::vector<uint32_t>> d = RunThroughLayout(m, &arch);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int w = 0; w < m.warps; ++w) {
    for (int q = 0; q < 4; ++q) {
      for (int row = 0; row < 8; ++row) {
        for (int column = 0; column < 8; ++column) {
          float expected = bits_to_f32(m.c[m.TileIndex(w, q, row, column)]);
          for (int k = 0; k < 4 * m.steps; ++k) {
            expected += f16_to_f32(m.a[m.OperandIndex(w, q, row, k)]) * f16_to_f32(m.b[m.OperandIndex(w, q, column, k)]);
          }
          ASSERT_EQ(bits_to_f32((*d)[m.TileIndex(w, q, row, column)]), expected)
              << "warp " << w << " quad-pair " << q << " row " << row << " column " << column;
        }
      }
    }
  }
}

TEST_F(MmaProbeTest, RandomChainsMatchTheSm90EmulatedModelOnSm90) {
  std::mt19937_64 rng(TestSeed("MmaProbeTest.Chains"));
  Matrices m{.warps = 64, .steps = 8};
  m.a.resize(size_t(m.warps) * 4 * 8 * 4 * m.steps);
  m.b.resize(m.a.size());
  m.c.resize(size_t(m.warps) * 4 * 64);
  for (uint16_t& x : m.a) x = uint16_t(rng());
  for (uint16_t& x : m.b) x = uint16_t(rng() & 0xBFFF);  // no fp16 Inf/NaN in B: keep most chains finite
  for (uint32_t& x : m.c) x = uint32_t(rng());
  int arch = 0;
  absl::StatusOr<std::vector<uint32_t>> d = RunThroughLayout(m, &arch);
  ASSERT_TRUE(d.ok()) << d.status();
  if (arch != 900) GTEST_SKIP() << "device code is sm_" << arch / 10 << ": the sm90-emulated model is for sm_90";
  size_t mismatches = 0;
  for (int w = 0; w < m.warps; ++w) {
    for (int q = 0; q < 4; ++q) {
      for (int row = 0; row < 8; ++row) {
        for (int column = 0; column < 8; ++column) {
          uint32_t acc = m.c[m.TileIndex(w, q, row, column)];
          for (int s = 0; s < m.steps; ++s) {
            uint16_t a[4], b[4];
            for (int i = 0; i < 4; ++i) {
              a[i] = m.a[m.OperandIndex(w, q, row, 4 * s + i)];
              b[i] = m.b[m.OperandIndex(w, q, column, 4 * s + i)];
            }
            acc = Step(StepModel::kSm90Emulated, acc, std::span<const uint16_t, 4>(a), std::span<const uint16_t, 4>(b));
          }
          const uint32_t got = (*d)[m.TileIndex(w, q, row, column)];
          if (got != acc && ++mismatches <= 5) {
            ADD_FAILURE() << "warp " << w << " q " << q << " (" << row << "," << column << "): model " << std::hex
                          << acc << " device " << got;
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace mxdiff::testing
