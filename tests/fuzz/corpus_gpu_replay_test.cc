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
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace mxdiff::fuzz
