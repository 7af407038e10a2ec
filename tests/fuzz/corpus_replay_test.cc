// Replays every corpus file through its registered target's checks (fuzz/driver/fuzz_target.h), in
// sorted order: every cpu target, and fuzz_gemm's CPU side (the reference and the example external
// kernel; its GPU side is corpus_gpu_replay_test.cc, fuzz_layer's is fuzz_layer_corpus_replay).
// corpus/regressions/ holds findings named <target>.<signature>.<hash>.case: each goes through
// the target that found it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/driver/fuzz_target.h"
#include "gtest/gtest.h"

namespace mxdiff::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CorpusFiles(const std::string& folder) {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(MXDIFF_CORPUS_DIR) / folder;
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> ReadFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The targets replayed here: fuzz_gemm with the example external kernel only (its CPU side).
bool ReplayedHere(const FuzzTarget& target) {
  if (target.name == "fuzz_gemm") {
    static const bool initialized = [&] {
      const std::string external = std::string("--external=") + MXDIFF_EXAMPLE_KERNEL;
      const std::string_view args[] = {"corpus_replay_test", "--modules=external", external};
      target.initialize(std::span<const std::string_view>(args));
      return true;
    }();
    return initialized;
  }
  return target.options.kind == "cpu";
}

// Every finding of every check on `file`, as a test failure; false when it does not decode.
void ExpectClean(const FuzzTarget& target, const fs::path& file) {
  const InputFindings findings = target.check(ReadFile(file), /*fresh=*/false);
  ASSERT_TRUE(findings.has_value()) << file << ": not an input of " << target.name;
  for (const Finding& finding : *findings) {
    ADD_FAILURE() << file << " (" << target.name << "): " << finding.signature << "\n" << finding.description;
  }
}

class CorpusReplay : public testing::TestWithParam<const FuzzTarget*> {};

TEST_P(CorpusReplay, EveryFileClean) {
  const FuzzTarget& target = *GetParam();
  if (!ReplayedHere(target)) GTEST_SKIP() << target.name << ": replayed by its own binary on a GPU";
  const std::vector<fs::path> files = CorpusFiles(std::string(target.name));
  ASSERT_FALSE(files.empty()) << "corpus/" << target.name << "/ is empty: every corpus folder needs seeds";
  for (const fs::path& file : files) ExpectClean(target, file);
}

INSTANTIATE_TEST_SUITE_P(Registry, CorpusReplay, testing::ValuesIn(Registry().begin(), Registry().end()),
                         [](const testing::TestParamInfo<const FuzzTarget*>& info) {
                           return std::string(info.param->name);
                         });

TEST(CorpusReplay, RegressionsThroughTheTargetThatFoundThem) {
  const std::vector<fs::path> files = CorpusFiles("regressions");
  ASSERT_FALSE(files.empty()) << "corpus/regressions/ is empty";
  for (const fs::path& file : files) {
    const FuzzTarget* target = TargetOfFileName(file.filename().string());
    ASSERT_NE(target, nullptr) << file << ": the name must start with the target that found it";
    ASSERT_TRUE(ReplayedHere(*target)) << file << ": a regression of " << target->name << " is not replayed here";
    ExpectClean(*target, file);
  }
}

TEST(CorpusReplay, EveryCorpusFolderIsNonEmpty) {
  int folders = 0;
  for (const auto& entry : fs::directory_iterator(MXDIFF_CORPUS_DIR)) {
    if (!entry.is_directory()) continue;
    ++folders;
    EXPECT_FALSE(CorpusFiles(entry.path().filename().string()).empty()) << entry.path() << " is empty";
  }
  EXPECT_GE(folders, 5);
}

}  // namespace
}  // namespace mxdiff::fuzz
