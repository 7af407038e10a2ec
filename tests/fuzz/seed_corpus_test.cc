// corpus/fuzz_gemm/ and corpus/fuzz_layer/ against the kernels' list of CTA shapes
// (kernels/builtin_kernels.h, kCtaShapes), which the seed writers (fuzz/seeds/) iterate: every
// shape has its seeds, and no shape-named seed is of a shape the kernels lack. A shape added to or
// removed from kCtaShapes without rewriting the seeds fails.
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"

namespace {

namespace fs = std::filesystem;

// fuzz_gemm (seed_corpus_main.cc, GemmSeeds): splits 1 and 3, scale bytes admitted, 112 and 129.
TEST(SeedCorpusTest, FuzzGemmHasTheSeedsOfEveryBuiltinCtaShapeAndNoOther) {
  const fs::path dir = fs::path(MXDIFF_CORPUS_DIR) / "fuzz_gemm";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::set<std::string> shapes;
  for (const mxdiff::CtaShape& shape : mxdiff::kCtaShapes) {
    const std::string name = fmt::format("{}x{}x{}", shape.m, shape.n, shape.k);
    shapes.insert(name);
    for (int splits : {1, 3}) {
      for (const char* raw : {"admitted", "112", "129"}) {
        const fs::path seed = dir / fmt::format("{}-s{}-raw{}.case", name, splits, raw);
        EXPECT_TRUE(fs::is_regular_file(seed)) << seed << " missing: rewrite with mxdiff_fuzz_seeds";
      }
    }
  }
  const std::regex shaped(R"((\d+x\d+x\d+)-s\d+-raw\w+\.case)");
  int seen = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::smatch match;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, match, shaped)) continue;
    ++seen;
    EXPECT_EQ(shapes.count(match[1].str()), 1u) << file << ": a CTA shape not in kCtaShapes";
  }
  EXPECT_EQ(seen, int(std::size(mxdiff::kCtaShapes)) * 2 * 3);
}

// corpus/fuzz_layer/ (fuzz/seeds/layer_seeds_main.cc, EmitTacticSeeds): one tactic-MxNxK-sS seed
// per builtin CTA shape, and none of another shape.
TEST(SeedCorpusTest, FuzzLayerHasOneTacticSeedPerBuiltinCtaShape) {
  const fs::path dir = fs::path(MXDIFF_CORPUS_DIR) / "fuzz_layer";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::map<std::string, int> seeds;
  for (const mxdiff::CtaShape& shape : mxdiff::kCtaShapes) seeds[fmt::format("{}x{}x{}", shape.m, shape.n, shape.k)] = 0;
  const std::regex tactic(R"(tactic-(\d+x\d+x\d+)-s\d+\.case)");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::smatch match;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, match, tactic)) continue;
    const auto it = seeds.find(match[1].str());
    if (it == seeds.end()) {
      ADD_FAILURE() << file << ": a CTA shape not in kCtaShapes";
    } else {
      ++it->second;
    }
  }
  for (const auto& [shape, count] : seeds) EXPECT_EQ(count, 1) << "tactic-" << shape << "-s*.case: rewrite with mxdiff_layer_seeds";
}

}  // namespace
