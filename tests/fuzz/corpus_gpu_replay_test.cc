// The GPU side of fuzz_gemm's corpus: after the calibration guard, the known cases, every
// corpus/fuzz_gemm file and every fuzz_gemm regression through the ordinary, folded and
// folded-partial kernel modules.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/gemm_differential.h"
#include "fuzz/known_cases.h"
#include "fuzz/modules/module_loader.h"
#include "gtest/gtest.h"

namespace mxdiff::fuzz {
namespace {

namespace fs = std::filesystem;

TEST(CorpusGpuReplay, FuzzGemmThroughTheKernels) {
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

  std::vector<fs::path> files;
  for (const char* folder : {"fuzz_gemm", "regressions"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(MXDIFF_CORPUS_DIR) / folder)) {
      const std::string name = entry.path().filename().string();
      if (std::string(folder) == "fuzz_gemm" || name.rfind("fuzz_gemm.", 0) == 0) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    absl::StatusOr<FuzzCase> c = DecodeCase(bytes);
    ASSERT_TRUE(c.ok()) << file << ": " << c.status();
    const CheckResult finding = differential.CheckCase(*c);
    EXPECT_FALSE(finding.has_value()) << file << ": " << finding->signature << "\n" << finding->description;
  }
  EXPECT_GT(differential.cases_compared(), 0u);
}

}  // namespace
}  // namespace mxdiff::fuzz
