// The GPU side of fuzz_gemm's corpus: after the calibration guard, the known cases, every
// corpus/fuzz_gemm file and every fuzz_gemm regression through the ordinary, folded and
// folded-partial kernel modules. The corpus is $MXDIFF_CORPUS_DIR, else the source tree's the
// build was configured from (a build carried to another machine sets the variable).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/checks/gemm_differential.h"
#include "fuzz/checks/known_cases.h"
#include "fuzz/modules/module_loader.h"
#include "gtest/gtest.h"

namespace mxdiff::fuzz {
namespace {

namespace fs = std::filesystem;

fs::path CorpusDir() {
  const char* dir = std::getenv("MXDIFF_CORPUS_DIR");
  return dir != nullptr && *dir != '\0' ? fs::path(dir) : fs::path(MXDIFF_CORPUS_DIR);
}

TEST(CorpusGpuReplay, FuzzGemmThroughTheKernels) {
  std::vector<fs::path> files;
  for (const char* folder : {"fuzz_gemm", "regressions"}) {
    const fs::path dir = CorpusDir() / folder;
    std::error_code error;
    fs::directory_iterator entries(dir, error);
    ASSERT_FALSE(error) << "no corpus folder " << dir << " (" << error.message()
                        << "): set MXDIFF_CORPUS_DIR to the repository's corpus/";
    for (const auto& entry : entries) {
      const std::string name = entry.path().filename().string();
      if (std::string(folder) == "fuzz_gemm" || name.rfind("fuzz_gemm.", 0) == 0) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
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
