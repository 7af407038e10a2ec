// The GPU side of fuzz_gemm's corpus: after the calibration guard, the known cases, every
// corpus/fuzz_gemm file and every fuzz_gemm regression through the ordinary, folded and
// folded-partial kernel modules. The corpus is $MXDIFF_CORPUS_DIR, else the source tree's the
// build was configured from (a build carried to another machine sets the variable). Then the same
// with the device reference as fuzz_gemm's oracle, every large case also checked on the CPU.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/checks/gemm_differential.h"
#include "fuzz/checks/known_cases.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "gtest/gtest.h"
#include "reference/decode_shapes.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {
namespace {

namespace fs = std::filesystem;

fs::path CorpusDir() {
  const char* dir = std::getenv("MXDIFF_CORPUS_DIR");
  return dir != nullptr && *dir != '\0' ? fs::path(dir) : fs::path(MXDIFF_CORPUS_DIR);
}

std::vector<fs::path> FuzzGemmFiles() {
  std::vector<fs::path> files;
  for (const char* folder : {"fuzz_gemm", "regressions"}) {
    const fs::path dir = CorpusDir() / folder;
    std::error_code error;
    fs::directory_iterator entries(dir, error);
    EXPECT_FALSE(error) << "no corpus folder " << dir << " (" << error.message()
                        << "): set MXDIFF_CORPUS_DIR to the repository's corpus/";
    if (error) return {};
    for (const auto& entry : entries) {
      const std::string name = entry.path().filename().string();
      if (std::string(folder) == "fuzz_gemm" || name.rfind("fuzz_gemm.", 0) == 0) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

void ReplayFiles(const std::vector<fs::path>& files, GemmDifferential& differential) {
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    absl::StatusOr<FuzzCase> c = DecodeCase(bytes);
    ASSERT_TRUE(c.ok()) << file << ": " << c.status();
    const CaseEvaluation evaluation = differential.Evaluate(*c);
    for (const CheckVerdict& verdict : evaluation.verdicts) {
      EXPECT_FALSE(verdict.finding.has_value()) << file << ": " << verdict.finding->signature << "\n"
                                                << verdict.finding->description;
    }
  }
}

TEST(CorpusGpuReplay, FuzzGemmThroughTheKernels) {
  const std::vector<fs::path> files = FuzzGemmFiles();
  ASSERT_FALSE(files.empty()) << "no fuzz_gemm cases under " << CorpusDir();

  absl::StatusOr<LoadedModules> loaded = LoadBuiltinModules();
  if (loaded.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << loaded.status() << " (the CPU side ran in fuzz_cpu_test)";
  }
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::printf("%s", loaded->report.c_str());
  GemmDifferential differential(std::move(loaded->modules));
  for (const FuzzCase& known : KnownCases()) {
    const CheckResult finding = differential.CheckCase(known);
    EXPECT_FALSE(finding.has_value()) << "known case " << TacticName(known.tactic) << ": " << finding->signature
                                      << "\n" << finding->description;
  }

  ReplayFiles(files, differential);
  EXPECT_GT(differential.cases_compared(), 0u);
}

// The same corpus with fuzz_gemm's device oracle (issue 19): every large case judged on the device
// reference and, with cpu_check_every 1, every one of them also on the CPU: no disagreement.
TEST(CorpusGpuReplay, FuzzGemmWithTheDeviceOracleCheckedOnTheCpu) {
  const std::vector<fs::path> files = FuzzGemmFiles();
  ASSERT_FALSE(files.empty()) << "no fuzz_gemm cases under " << CorpusDir();
  absl::StatusOr<std::unique_ptr<ReferenceOracle>> oracle = MakeDeviceReferenceOracle();
  if (oracle.status().code() == absl::StatusCode::kUnavailable) GTEST_SKIP() << oracle.status();
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  absl::StatusOr<LoadedModules> loaded = LoadBuiltinModules();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  OracleSettings settings;
  settings.cpu_check_every = 1;
  GemmDifferential differential(std::move(loaded->modules), *std::move(oracle), settings);
  for (const FuzzCase& known : KnownCases()) {
    const CheckResult finding = differential.CheckCase(known);
    EXPECT_FALSE(finding.has_value()) << "known case " << TacticName(known.tactic) << ": " << finding->signature;
  }
  ReplayFiles(files, differential);
  const DifferentialCounters& counters = differential.counters();
  std::printf("%s", CountersText(counters).c_str());
  EXPECT_GT(counters.cases_device, 0u) << "the corpus has decode-shaped cases above the device threshold";
  EXPECT_EQ(counters.cases_cpu_checked, counters.cases_device);
  EXPECT_EQ(counters.oracle_disagreements, 0u);
  EXPECT_EQ(counters.device_fallbacks + counters.device_refused, 0u) << differential.last_fallback();
}

// The device way (GoesDeviceWay): a decode-shaped case whose weights are recipes, its reference
// computed on the oracle's own device materialization, gives the same oracle bits as the host
// tensors' path (and the CPU's) for every model and transform, and through the differential the
// same kernel and reference bits as a differential whose oracle takes the host tensors.
class HostTensorsOnly final : public ReferenceOracle {
 public:
  explicit HostTensorsOnly(std::unique_ptr<ReferenceOracle> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                    std::vector<uint16_t>& output) override {
    return inner_->Gemm(problem, options, output);
  }

 private:
  std::unique_ptr<ReferenceOracle> inner_;
};

FuzzCase DeviceWayCase(uint64_t seed) {
  FuzzCase c;
  std::vector<int> rows(16, 0);
  rows[1] = 1, rows[6] = 8, rows[15] = 3;
  ResizeCase(c, 16, kW13Tp8.n, kW13Tp8.k, rows);
  c.tactic = Tactic{16, 128, 32, 2, 0};
  c.request = TransformRequest::kAuto;
  c.recipe(TensorKind::kActivations) = TensorRecipe{ValueClass::kNormal, 0, seed, {}};
  c.recipe(TensorKind::kCodes) = TensorRecipe{ValueClass::kUniform, 4, seed + 1, {{7, 15}, {123457, 8}}};
  c.recipe(TensorKind::kScales) = TensorRecipe{ValueClass::kCheckpoint, 0, seed + 2, {{3, 120}}};
  MaterializeCase(c);
  return c;
}

TEST(DeviceWay, TheDevicesMaterializationGivesTheHostPathsBits) {
  absl::StatusOr<std::unique_ptr<ReferenceOracle>> oracle = MakeDeviceReferenceOracle();
  if (oracle.status().code() == absl::StatusCode::kUnavailable) GTEST_SKIP() << oracle.status();
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  ASSERT_TRUE((*oracle)->TakesDeviceWeights());
  const std::unique_ptr<DeviceRecipeWeights> device = MakeDeviceRecipeWeights();
  ASSERT_NE(device, nullptr);
  for (uint64_t seed : {11u, 12u, 11u}) {  // new weights, then back: the kept materialization is redone
    const FuzzCase c = DeviceWayCase(seed);
    const absl::StatusOr<const DeviceCaseWeights*> weights = device->Of(c);
    ASSERT_TRUE(weights.ok()) << weights.status();
    EXPECT_EQ((*weights)->admission, AdmitLayer(c.scale_bytes)) << seed;
    for (StepModel model : {StepModel::kV100, StepModel::kSm90Emulated, StepModel::kSm90EmulatedFtz, StepModel::kExact}) {
      for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
        ReferenceOptions options;
        options.model = model;
        options.transform = transform;
        options.tactic.cta_k = 32;
        options.tactic.splits = 2;
        std::vector<uint16_t> device_way, host_way, cpu;
        ASSERT_TRUE((*oracle)->GemmOnDeviceWeights(c.Problem(), **weights, options, device_way).ok());
        ASSERT_TRUE((*oracle)->Gemm(c.Problem(), options, host_way).ok());
        ASSERT_TRUE(ReferenceGemm(c.Problem(), options, cpu).ok());
        EXPECT_EQ(device_way, host_way) << StepModelName(model) << " " << TransformName(transform) << " " << seed;
        EXPECT_EQ(device_way, cpu) << StepModelName(model) << " " << TransformName(transform) << " " << seed;
      }
    }
  }
}

TEST(DeviceWay, ALargeCaseGivesTheSameKernelAndOracleBitsAsTheHostPath) {
  absl::StatusOr<LoadedModules> device_modules = LoadBuiltinModules();
  if (device_modules.status().code() == absl::StatusCode::kUnavailable) GTEST_SKIP() << device_modules.status();
  ASSERT_TRUE(device_modules.ok()) << device_modules.status();
  absl::StatusOr<LoadedModules> host_modules = LoadBuiltinModules();
  ASSERT_TRUE(host_modules.ok()) << host_modules.status();
  // The oracle and the kernels read the one device materialization each case's CaseWeights asks for.
  absl::StatusOr<std::unique_ptr<ReferenceOracle>> device_way = MakeDeviceReferenceOracle();
  ASSERT_TRUE(device_way.ok()) << device_way.status();
  absl::StatusOr<std::unique_ptr<ReferenceOracle>> host_way = MakeDeviceReferenceOracle();
  ASSERT_TRUE(host_way.ok()) << host_way.status();
  OracleSettings settings;
  settings.cpu_check_every = 1000000;  // judged on the device bits alone (CpuCheckSampled aside)
  GemmDifferential through_device(std::move(device_modules->modules), *std::move(device_way), settings);
  GemmDifferential through_host(std::move(host_modules->modules),
                                std::make_unique<HostTensorsOnly>(*std::move(host_way)), settings);
  const size_t materialized_before = through_device.weights().device_materializations();
  size_t skipped = 0;
  for (uint64_t seed = 21; seed <= 24; ++seed) {
    const FuzzCase c = DeviceWayCase(seed);
    ASSERT_TRUE(GoesDeviceWay(c, settings, through_device.device_oracle()));
    ASSERT_FALSE(GoesDeviceWay(c, settings, through_host.device_oracle()));
    // As fuzz_gemm decodes it (DecodeForDifferential): without its weights on the host where no
    // CPU check needs them; the kernels then prepare from the device materialization the oracle
    // reads, admitted there.
    FuzzCase device_case = c;
    if (!through_device.NeedsHostWeights(c)) {
      device_case.packed_codes.clear();
      device_case.scale_bytes.clear();
      ++skipped;
    }
    const CaseEvaluation a = through_device.Evaluate(device_case), b = through_host.Evaluate(c);
    EXPECT_EQ(through_device.weights().device_materializations(), materialized_before + size_t(seed - 20))
        << "one device materialization per case, shared by the oracle and the kernels";
    EXPECT_EQ(a.FirstFinding(), nullptr) << a.FirstFinding()->finding->signature << "\n" << a.FirstFinding()->finding->description;
    EXPECT_EQ(b.FirstFinding(), nullptr) << b.FirstFinding()->finding->signature << "\n" << b.FirstFinding()->finding->description;
    ASSERT_EQ(a.runs.size(), b.runs.size());
    for (size_t i = 0; i < a.runs.size(); ++i) {
      EXPECT_EQ(a.runs[i].output, b.runs[i].output) << a.runs[i].module << " " << seed;
      EXPECT_EQ(a.runs[i].reference, b.runs[i].reference) << a.runs[i].module << " " << seed;
      EXPECT_FALSE(a.runs[i].reference.empty()) << a.runs[i].module << " ran";
    }
  }
  std::printf("%s", CountersText(through_device.counters()).c_str());
  EXPECT_EQ(through_device.counters().cases_device_materialized, 4u);
  EXPECT_GT(skipped, 0u);
  EXPECT_EQ(through_device.counters().host_weights_skipped, skipped);
  EXPECT_EQ(through_device.counters().cases_device, 4u);
  EXPECT_EQ(through_host.counters().cases_device_materialized, 0u);
  EXPECT_EQ(through_host.counters().cases_device, 4u);
}

}  // namespace
}  // namespace mxdiff::fuzz
