#include "fuzz/findings.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "gtest/gtest.h"

namespace mxdiff::fuzz {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class FindingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("findings-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    setenv("MXDIFF_FINDINGS_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("MXDIFF_FINDINGS_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(FindingsTest, SignatureStemIsFileNameSafe) {
  EXPECT_EQ(SignatureStem("mismatch/folded/16x128x32/s5/a=0"), "mismatch_folded_16x128x32_s5_a=0");
  EXPECT_EQ(SignatureStem("a b*c"), "a_b_c");
}

TEST_F(FindingsTest, WritesTheInputAndADescription) {
  const std::vector<uint8_t> input = {1, 2, 3, 250};
  absl::StatusOr<std::string> path = WriteFinding("fuzz_x", input, Finding{"route/folded-on-refused", "details"});
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(std::filesystem::path(*path).parent_path(), dir_);
  EXPECT_EQ(ReadText(*path), std::string("\x01\x02\x03\xfa", 4));
  const std::string text = ReadText(path->substr(0, path->size() - 5) + ".txt");
  EXPECT_NE(text.find("signature: route/folded-on-refused"), std::string::npos) << text;
  EXPECT_NE(text.find("repro "), std::string::npos) << text;
  EXPECT_NE(text.find("details"), std::string::npos) << text;
}

TEST_F(FindingsTest, TheFindingIsOnDiskBeforeTheAbort) {
  const std::vector<uint8_t> input = {9, 9};
  EXPECT_DEATH(ReportFindingAndAbort("fuzz_x", input, Finding{"nondeterminism/folded/x", "twice"}),
               "FINDING nondeterminism/folded/x");
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    found |= entry.path().extension() == ".case" && ReadText(entry.path()) == std::string("\x09\x09", 2);
  }
  EXPECT_TRUE(found) << "no .case file in " << dir_;
}

}  // namespace
}  // namespace mxdiff::fuzz
