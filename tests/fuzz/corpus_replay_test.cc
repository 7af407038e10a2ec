// Replays every corpus file through its target's property, in sorted order (CPU side; the GPU
// side of fuzz_gemm is corpus_gpu_replay_test.cc). corpus/regressions/ holds findings named
// <target>.<signature>.<hash>.case: each goes through the target that found it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>

#include "fuzz/dispatch_target.h"
#include "fuzz/gemm_differential.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/reference_target.h"
#include "fuzz/transform_target.h"
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

FuzzCase ReadCase(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
  EXPECT_TRUE(decoded.ok()) << file << ": " << decoded.status();
  return decoded.ok() ? *decoded : FuzzCase{};
}

using Check = std::function<CheckResult(const FuzzCase&)>;

CheckResult GemmCpuSide(const FuzzCase& c) {
  static GemmDifferential* differential = [] {
    std::vector<std::unique_ptr<GemmModule>> modules;
    absl::StatusOr<std::unique_ptr<GemmModule>> example = LoadExternalModule(MXDIFF_EXAMPLE_KERNEL);
    if (example.ok()) {
      modules.push_back(*std::move(example));
    } else {
      ADD_FAILURE() << example.status();
    }
    return new GemmDifferential(std::move(modules));
  }();
  return differential->CheckCase(c);
}

const std::map<std::string, Check>& Targets() {
  static const std::map<std::string, Check> targets = {
      {"fuzz_transform", CheckTransformCase},
      {"fuzz_dispatch", CheckDispatchCase},
      {"fuzz_reference", CheckReferenceCase},
      {"fuzz_gemm", GemmCpuSide},
  };
  return targets;
}

void Replay(const std::string& folder, const Check& check) {
  const std::vector<fs::path> files = CorpusFiles(folder);
  ASSERT_FALSE(files.empty()) << "corpus/" << folder << "/ is empty: every corpus folder needs seeds";
  for (const fs::path& file : files) {
    const CheckResult finding = check(ReadCase(file));
    EXPECT_FALSE(finding.has_value()) << file << ": " << finding->signature << "\n" << finding->description;
  }
}

TEST(CorpusReplay, FuzzTransform) { Replay("fuzz_transform", CheckTransformCase); }
TEST(CorpusReplay, FuzzDispatch) { Replay("fuzz_dispatch", CheckDispatchCase); }
TEST(CorpusReplay, FuzzReference) { Replay("fuzz_reference", CheckReferenceCase); }
TEST(CorpusReplay, FuzzGemmCpuSide) {
  std::printf("fuzz_gemm replay here checks the CPU side only (reference, example external kernel); the GPU "
              "side is fuzz_gpu_test\n");
  Replay("fuzz_gemm", GemmCpuSide);
}

TEST(CorpusReplay, RegressionsThroughTheTargetThatFoundThem) {
  const std::vector<fs::path> files = CorpusFiles("regressions");
  ASSERT_FALSE(files.empty()) << "corpus/regressions/ is empty";
  for (const fs::path& file : files) {
    const std::string name = file.filename().string();
    const auto target = Targets().find(name.substr(0, name.find('.')));
    ASSERT_NE(target, Targets().end()) << file << ": the name must start with the target that found it";
    const CheckResult finding = target->second(ReadCase(file));
    EXPECT_FALSE(finding.has_value()) << file << " regressed: " << finding->signature << "\n"
                                      << finding->description;
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
