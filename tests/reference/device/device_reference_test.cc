// The device reference (reference/device/) against the CPU reference, bit for bit: every
// recorded hardware vector at step level (tests/vectors/, every model), random steps dense in
// special values, the hand-picked step cases, random grouped problems of every model,
// transform and split count with NaN, Inf, subnormals, -0 and any scale byte, and the real
// decode shapes (6 experts x 1 row; W13 K 4096 N 512 and W2 K 256 N 4096 at TP8). Label gpu:
// skips with a message where no CUDA device exists. MXDIFF_SEED=<n> replays the random parts.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "reference/admission.h"
#include "reference/device/device_reference.h"
#include "reference/fp16.h"
#include "reference/reference_gemm.h"
#include "reference/step_model_cases.h"
#include "reference/vector_file.h"
#include "tests/reference/gemm_test_problems.h"
#include "tests/reference/special_values.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

using testing::OwnedProblem;

// The recorded vectors: $MXDIFF_VECTORS_DIR where set (a build carried to a GPU machine runs in
// another folder than the one it was configured from), else the configured source tree's.
std::string VectorsDir() {
  const char* dir = std::getenv("MXDIFF_VECTORS_DIR");
  return dir != nullptr && *dir != '\0' ? dir : MXDIFF_VECTORS_DIR;
}
const std::string kV100Vectors = VectorsDir() + "/v100_hmma884_f32.csv";

// Where the vectors are not, every run says so, with or without a device.
TEST(DeviceReferenceInputs, TheRecordedVectorsAreThere) {
  ASSERT_TRUE(std::filesystem::is_regular_file(kV100Vectors))
      << "no vector file " << kV100Vectors << ": set MXDIFF_VECTORS_DIR to the repository's tests/vectors";
}

class DeviceReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!DeviceReferenceAvailable(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

std::string Hex(uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", bits);
  return text;
}

// Every row of the hardware vectors, chained on the device for every model: equal to the CPU
// model bit for bit, and for v100 equal to what the V100 recorded.
TEST_F(DeviceReferenceTest, HardwareVectorsAtStepLevel) {
  ASSERT_TRUE(std::filesystem::exists(kV100Vectors))
      << "no vector file " << kV100Vectors << ": set MXDIFF_VECTORS_DIR to the repository's tests/vectors";
  absl::StatusOr<VectorFile> file = ReadVectorFile(kV100Vectors);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->rows.size(), 2500u);
  std::vector<uint32_t> c;
  std::vector<uint16_t> a, b;
  for (const VectorRow& row : file->rows) {
    c.push_back(row.c);
    a.insert(a.end(), row.a.begin(), row.a.end());
    b.insert(b.end(), row.b.begin(), row.b.end());
  }
  for (StepModel model : kAllStepModels) {
    std::vector<uint32_t> d;
    const absl::Status status = DeviceChainSteps(model, file->k, c, a, b, d);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(d.size(), file->rows.size());
    int mismatches = 0;
    for (size_t r = 0; r < d.size(); ++r) {
      const uint32_t cpu = EvaluateVectorRow(model, file->rows[r]);
      if (d[r] != cpu) {
        if (++mismatches <= 10) {
          ADD_FAILURE() << StepModelName(model) << " " << kV100Vectors << ":" << file->rows[r].line << ": device "
                        << Hex(d[r]) << " cpu " << Hex(cpu);
        }
      }
      if (model == StepModel::kV100) {
        EXPECT_TRUE(VectorResultMatches(file->rows[r].d, d[r]))
            << kV100Vectors << ":" << file->rows[r].line << ": recorded " << Hex(file->rows[r].d) << " device "
            << Hex(d[r]);
      }
    }
    EXPECT_EQ(mismatches, 0) << StepModelName(model);
  }
}

// Random chains of 1 and 4 steps, inputs dense in special values, every model.
TEST_F(DeviceReferenceTest, RandomStepsEqualCpuSteps) {
  std::mt19937_64 rng(testing::TestSeed());
  for (int k : {4, 16}) {
    const int rows = 1 << 17;
    std::vector<uint32_t> c(rows);
    std::vector<uint16_t> a(size_t(rows) * k), b(size_t(rows) * k);
    for (uint32_t& value : c) value = testing::SpecialF32(rng);
    for (uint16_t& value : a) value = testing::SpecialF16(rng);
    for (uint16_t& value : b) value = testing::SpecialF16(rng);
    for (StepModel model : kAllStepModels) {
      std::vector<uint32_t> d;
      const absl::Status status = DeviceChainSteps(model, k, c, a, b, d);
      ASSERT_TRUE(status.ok()) << status;
      for (int r = 0; r < rows; ++r) {
        const uint32_t cpu = ChainSteps(model, c[r], std::span<const uint16_t>(a).subspan(size_t(r) * k, k),
                                        std::span<const uint16_t>(b).subspan(size_t(r) * k, k));
        ASSERT_EQ(d[r], cpu) << StepModelName(model) << " chain " << r << " of k " << k << ": c " << Hex(c[r]);
      }
    }
  }
}

TEST_F(DeviceReferenceTest, HandPickedStepCases) {
  const auto cases = HandPickedStepCases();
  std::vector<uint32_t> c;
  std::vector<uint16_t> a, b;
  for (const StepCase& one : cases) {
    c.push_back(one.c);
    a.insert(a.end(), one.a.begin(), one.a.end());
    b.insert(b.end(), one.b.begin(), one.b.end());
  }
  for (StepModel model : kAllStepModels) {
    std::vector<uint32_t> d;
    const absl::Status status = DeviceChainSteps(model, 4, c, a, b, d);
    ASSERT_TRUE(status.ok()) << status;
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_EQ(d[i], cases[i].expected[int(model)]) << cases[i].name << " " << StepModelName(model) << ": " << cases[i].why;
  }
}

void ExpectDeviceEqualsCpu(const OwnedProblem& p, const ReferenceOptions& options, size_t& compared) {
  std::vector<uint32_t> cpu, device;
  absl::Status status = ReferenceGemmF32(p.View(), options, cpu);
  ASSERT_TRUE(status.ok()) << status;
  status = DeviceReferenceGemmF32(p.View(), options, device);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(cpu.size(), device.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(device[i], cpu[i]) << "element " << i << " (row " << i / p.n << ", column " << i % p.n << ") of "
                                 << p.row_offsets.back() << " x " << p.n << " in " << p.groups << " groups, K " << p.k
                                 << ", " << TacticName(options.tactic) << ", " << StepModelName(options.model)
                                 << ", transform " << int(options.transform) << ": device " << Hex(device[i])
                                 << " cpu " << Hex(cpu[i]);
  }
  compared += cpu.size();
}

struct ModelTransform {
  StepModel model;
  Transform transform;
};

class DeviceReferenceGemmTest : public ::testing::TestWithParam<ModelTransform> {
 protected:
  void SetUp() override {
    std::string why;
    if (!DeviceReferenceAvailable(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

// Random problems: 1..4 groups (empty ones included) of 0..3 rows, N 1..80, K 32..1280, every
// split count 1..8 with several CTA_K, values from moderate to dense in specials.
TEST_P(DeviceReferenceGemmTest, RandomProblemsEqualCpu) {
  const ModelTransform param = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  size_t compared = 0;
  const int trials = param.model == StepModel::kExact ? 24 : 48;
  for (int trial = 0; trial < trials; ++trial) {
    const int k = 32 * (1 + int(rng() % 40));
    const OwnedProblem p =
        trial % 3 == 0 ? testing::RandomProblem(rng, 1 + int(rng() % 4), 1 + int(rng() % 80), k, 3,
                                                trial % 2 ? testing::Values::kWild : testing::Values::kModerate)
                       : testing::SpecialProblem(rng, 1 + int(rng() % 4), 1 + int(rng() % 80), k, 3, trial % 2 == 0);
    ReferenceOptions options;
    options.model = param.model;
    options.transform = param.transform;
    options.tactic.cta_k = 4 * (1 + int(rng() % 64));
    options.tactic.splits = 1 + trial % 8;
    ExpectDeviceEqualsCpu(p, options, compared);
    if (HasFatalFailure()) return;
  }
  std::printf("[ compared ] %zu outputs\n", compared);
}

// The decode shapes: 6 experts x 1 row each, W13 (K 4096, N 512) and W2 (K 256, N 4096) at TP8,
// checkpoint-range scales with a sprinkle of specials, split counts 1, 3 and 8.
TEST_P(DeviceReferenceGemmTest, DecodeShapesEqualCpu) {
  const ModelTransform param = GetParam();
  std::mt19937_64 rng(testing::TestSeed());
  size_t compared = 0;
  for (const auto& [n, k] : {std::pair{512, 4096}, std::pair{4096, 256}}) {
    OwnedProblem p = testing::SpecialProblem(rng, 6, n, k, 1, false);
    p.row_offsets = {0, 1, 2, 3, 4, 5, 6};
    p.activations.resize(6 * size_t(k));
    for (uint16_t& a : p.activations)
      a = rng() % 64 == 0 ? testing::SpecialF16(rng) : uint16_t(0x3000 + (rng() & 0x83FF));
    for (int splits : {1, 3, 8}) {
      ReferenceOptions options;
      options.model = param.model;
      options.transform = param.transform;
      options.tactic.cta_k = 64;
      options.tactic.splits = splits;
      ExpectDeviceEqualsCpu(p, options, compared);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_EQ(compared, size_t(3) * (6 * 512 + 6 * 4096));
}

INSTANTIATE_TEST_SUITE_P(EveryModelAndTransform, DeviceReferenceGemmTest,
                         ::testing::Values(ModelTransform{StepModel::kV100, Transform::kOrdinary},
                                           ModelTransform{StepModel::kV100, Transform::kFolded},
                                           ModelTransform{StepModel::kSm90Emulated, Transform::kOrdinary},
                                           ModelTransform{StepModel::kSm90Emulated, Transform::kFolded},
                                           ModelTransform{StepModel::kSm90EmulatedFtz, Transform::kOrdinary},
                                           ModelTransform{StepModel::kSm90EmulatedFtz, Transform::kFolded},
                                           ModelTransform{StepModel::kExact, Transform::kOrdinary},
                                           ModelTransform{StepModel::kExact, Transform::kFolded}),
                         [](const ::testing::TestParamInfo<ModelTransform>& info) {
                           std::string name(StepModelName(info.param.model));
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name + (info.param.transform == Transform::kOrdinary ? "_ordinary" : "_folded");
                         });

// The fold admission counted on the device is AdmitLayer's verdict, refused bytes and their
// positions included: at chunk edges, spread over a 256-expert W13 layer, or everywhere.
TEST_F(DeviceReferenceTest, DeviceAdmissionIsAdmitLayersVerdict) {
  std::mt19937_64 rng(testing::TestSeed());
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
  std::vector<uint8_t> admitted_raws, refused_raws;
  for (int raw = 0; raw < 256; ++raw) (admitted[raw] ? admitted_raws : refused_raws).push_back(uint8_t(raw));
  DeviceWeights weights;
  int admitted_layouts = 0, refused_layouts = 0;
  for (size_t count : {size_t(1), size_t(16383), size_t(16384), size_t(16385), size_t(256) * 1024 * 128}) {
    for (int refused_wanted : {0, 1, 3, 40, -1}) {  // -1: every byte any value
      std::vector<uint8_t> bytes(count);
      for (uint8_t& raw : bytes) raw = admitted_raws[rng() % admitted_raws.size()];
      if (refused_wanted < 0) {
        for (uint8_t& raw : bytes) raw = uint8_t(rng());
      }
      for (int i = 0; i < refused_wanted; ++i) {
        const size_t edges[] = {0, count - 1, 16383 % count, 16384 % count, rng() % count};
        bytes[edges[i % 5]] = refused_raws[rng() % refused_raws.size()];
      }
      ASSERT_TRUE(weights.Reserve(16, count).ok());
      ASSERT_EQ(cudaMemcpy(weights.scales(), bytes.data(), count, cudaMemcpyHostToDevice), cudaSuccess);
      const absl::StatusOr<LayerAdmission> on_device = weights.AdmitScales();
      ASSERT_TRUE(on_device.ok()) << on_device.status();
      const LayerAdmission on_host = AdmitLayer(bytes);
      EXPECT_EQ(on_device->admitted, on_host.admitted) << count << " " << refused_wanted;
      EXPECT_EQ(on_device->refused_count, on_host.refused_count) << count << " " << refused_wanted;
      EXPECT_EQ(on_device->Describe(), on_host.Describe()) << count << " " << refused_wanted;
      EXPECT_TRUE(*on_device == on_host) << count << " " << refused_wanted;
      (on_host.admitted ? admitted_layouts : refused_layouts) += 1;
    }
  }
  EXPECT_GE(admitted_layouts, 5);
  EXPECT_GE(refused_layouts, 15);
}

// Refusals match the CPU reference's (and come before any device work).
TEST(DeviceReferenceValidationTest, RefusesWhatTheCpuReferenceRefuses) {
  OwnedProblem p;
  p.groups = 1, p.n = 2, p.k = 48;  // K not a multiple of 32
  p.row_offsets = {0, 1};
  p.activations.assign(48, 0x3C00);
  p.packed_codes.assign(48, 0x22);
  p.scale_bytes.assign(3, 127);
  std::vector<uint32_t> out;
  const absl::Status cpu = ReferenceGemmF32(p.View(), ReferenceOptions{}, out);
  const absl::Status device = DeviceReferenceGemmF32(p.View(), ReferenceOptions{}, out);
  EXPECT_FALSE(cpu.ok());
  EXPECT_EQ(device.code(), cpu.code()) << device;
  EXPECT_FALSE(DeviceChainSteps(StepModel::kV100, 6, std::vector<uint32_t>(1), std::vector<uint16_t>(6),
                                std::vector<uint16_t>(6), out)
                   .ok());
}

}  // namespace
}  // namespace mxdiff
