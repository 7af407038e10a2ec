#include "fuzz/driver/findings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz/formats/case_format.h"
#include "fuzz/checks/known_cases.h"
#include "fuzz/mutators/mutation_sequence.h"
#include "fuzz/driver/target_driver.h"
#include "gtest/gtest.h"

namespace mxdiff::fuzz {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first three known cases, encoded: inputs the driver decodes.
std::vector<std::vector<uint8_t>> ThreeKnownInputs() {
  std::vector<std::vector<uint8_t>> inputs;
  for (const FuzzCase& known : KnownCases()) {
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(known);
    if (!bytes.ok()) break;
    inputs.push_back(*bytes);
    if (inputs.size() == 3) break;
  }
  return inputs;
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

// Issue 34, item 10: a finding's file is named by its input's hash, so two inputs of one signature
// never overwrite each other, whether one worker or two wrote them into the one findings folder.
size_t CaseFilesIn(const std::filesystem::path& dir) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) count += entry.path().extension() == ".case";
  return count;
}

TEST_F(FindingsTest, TwoInputsOfOneSignatureFromOneWorkerAreBothKept) {
  const std::vector<uint8_t> first = {1, 2, 3}, second = {4, 5, 6};
  const absl::StatusOr<std::string> a = WriteFinding("fuzz_x", first, Finding{"mismatch/x", "one"});
  const absl::StatusOr<std::string> b = WriteFinding("fuzz_x", second, Finding{"mismatch/x", "two"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(ReadText(*a), std::string("\x01\x02\x03", 3));
  EXPECT_EQ(ReadText(*b), std::string("\x04\x05\x06", 3));
  EXPECT_EQ(CaseFilesIn(dir_), 2u);
}

TEST_F(FindingsTest, TwoInputsOfOneSignatureFromTwoWorkersAreBothKept) {
  const std::vector<uint8_t> first = {7, 7}, second = {8, 8};
  const pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) _exit(WriteFinding("fuzz_x", first, Finding{"mismatch/x", "worker 1"}).ok() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(worker, &status, 0), worker);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(WriteFinding("fuzz_x", second, Finding{"mismatch/x", "worker 2"}).ok());
  std::vector<std::string> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    if (entry.path().extension() == ".case") inputs.push_back(ReadText(entry.path()));
  }
  std::sort(inputs.begin(), inputs.end());
  EXPECT_EQ(inputs, (std::vector<std::string>{std::string("\x07\x07", 2), std::string("\x08\x08", 2)}));
}

// The input run before libFuzzer's loop is on disk while it runs (a crash leaves it), and gone after.
TEST_F(FindingsTest, TheRunningInputIsMarkedAndCleared) {
  const std::filesystem::path marked = dir_ / "running.case";
  std::filesystem::create_directories(dir_);
  setenv("MXDIFF_RUNNING_INPUT", marked.c_str(), 1);
  MarkRunningInput(std::vector<uint8_t>{5, 6}, "known case 1 of 2");
  EXPECT_EQ(ReadText(marked), std::string("\x05\x06", 2));
  EXPECT_EQ(ReadText(marked.string() + ".txt"), "known case 1 of 2\n");
  ClearRunningInput();
  EXPECT_FALSE(std::filesystem::exists(marked));
  EXPECT_FALSE(std::filesystem::exists(marked.string() + ".txt"));
  unsetenv("MXDIFF_RUNNING_INPUT");
  MarkRunningInput(std::vector<uint8_t>{5, 6}, "nowhere");  // without the variable: nothing written
  EXPECT_FALSE(std::filesystem::exists(marked));
}

TEST(ConfirmInFreshStateTest, AFindingThatComesBackKeepsItsSignature) {
  const Finding confirmed =
      ConfirmInFreshState(Finding{"mismatch/ordinary/8x128x64/s2/a=0", "element [0][1]"},
                          [] { return CheckResult(Finding{"mismatch/ordinary/8x128x64/s2/a=0", "element [0][1]"}); });
  EXPECT_EQ(confirmed.signature, "mismatch/ordinary/8x128x64/s2/a=0");
  EXPECT_NE(confirmed.description.find("element [0][1]"), std::string::npos) << confirmed.description;
  EXPECT_NE(confirmed.description.find("found again"), std::string::npos) << confirmed.description;
}

TEST(ConfirmInFreshStateTest, AFindingThatDoesNotComeBackIsFlakyWithBothResults) {
  const Finding gone = ConfirmInFreshState(Finding{"mismatch/ordinary/8x128x64/s2/a=0", "0x7fff, the reference 0xfc00"},
                                           [] { return CheckResult(); });
  EXPECT_EQ(gone.signature, "flaky/mismatch/ordinary/8x128x64/s2/a=0");
  EXPECT_NE(gone.description.find("0x7fff, the reference 0xfc00"), std::string::npos) << gone.description;
  EXPECT_NE(gone.description.find("found nothing"), std::string::npos) << gone.description;

  const Finding other = ConfirmInFreshState(Finding{"mismatch/folded/16x128x32/s3/admitted", "first"},
                                            [] { return CheckResult(Finding{"cuda-error/folded", "second"}); });
  EXPECT_EQ(other.signature, "flaky/mismatch/folded/16x128x32/s3/admitted");
  EXPECT_NE(other.description.find("found cuda-error/folded instead"), std::string::npos) << other.description;
  EXPECT_NE(other.description.find("first"), std::string::npos);
  EXPECT_NE(other.description.find("second"), std::string::npos);
}

TEST(InputHistoryTest, KeepsTheLastInputsOldestFirst) {
  InputHistory history;
  for (int i = 0; i < int(InputHistory::kInputs) + 5; ++i) history.Push(std::vector<uint8_t>(size_t(i % 7) + 1, uint8_t(i)));
  ASSERT_EQ(history.inputs().size(), InputHistory::kInputs);
  for (size_t i = 0; i < InputHistory::kInputs; ++i) {
    const int pushed = int(i) + 5;
    EXPECT_EQ(history.inputs()[i], std::vector<uint8_t>(size_t(pushed % 7) + 1, uint8_t(pushed))) << i;
  }
}

TEST_F(FindingsTest, WritesTheSequenceThatLedToAFindingInOrderEndingWithIt) {
  InputHistory history;
  history.Push(std::vector<uint8_t>{1});
  history.Push(std::vector<uint8_t>{2, 2});
  const std::vector<uint8_t> input = {3, 3, 3};
  absl::StatusOr<std::string> path = WriteFinding("fuzz_x", input, Finding{"flaky/x", "d"}, &history);
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string base = path->substr(0, path->size() - 5);
  EXPECT_EQ(ReadText(base + ".sequence/000.case"), std::string("\x01", 1));
  EXPECT_EQ(ReadText(base + ".sequence/001.case"), std::string("\x02\x02", 2));
  EXPECT_EQ(ReadText(base + ".sequence/002.case"), std::string("\x03\x03\x03", 3));
  EXPECT_FALSE(std::filesystem::exists(base + ".sequence/003.case"));
  const std::string text = ReadText(base + ".txt");
  EXPECT_NE(text.find("repro-sequence: repro --sequence " + base + ".sequence"), std::string::npos) << text;
}

// libFuzzer mutates a unit several times in a row: a call on the previous call's output goes on
// with its sequence; a call on another input starts afresh; a dropped attempt leaves no name.
TEST(MutationSequenceTest, ChainsFromTheCorpusUnit) {
  const std::vector<uint8_t> unit = {1}, first = {2}, second = {3};
  StartMutationSequence(unit);
  RecordMutation("shape");
  FinishMutationSequence(first);
  StartMutationSequence(first);
  RecordMutation("dropped");
  RestartMutationSequence();
  RecordMutation("tactic");
  FinishMutationSequence(second);
  EXPECT_EQ(MutationSequenceOf(second), "shape-tactic");
  EXPECT_EQ(MutationSequenceOf(first), "");
  StartMutationSequence(unit);
  RecordMutation("registry");
  FinishMutationSequence(second);
  EXPECT_EQ(MutationSequenceOf(second), "registry");
}

// The sidecar names the mutations that produced the input (only that input), and both repro
// commands carry the flags the process needs (an external kernel: --external=LIB).
TEST_F(FindingsTest, TheSidecarNamesTheMutationsAndTheReproFlags) {
  const std::vector<uint8_t> input = {4, 4};
  StartMutationSequence(std::vector<uint8_t>{9});
  RecordMutation("shape");
  RecordMutation("scale-element");
  FinishMutationSequence(input);
  SetReproFlags(" --external=/lib/x.so");
  InputHistory history;
  history.Push(std::vector<uint8_t>{1});
  absl::StatusOr<std::string> path = WriteFinding("fuzz_x", input, Finding{"x/y", "d"}, &history);
  SetReproFlags("");
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string base = path->substr(0, path->size() - 5);
  const std::string text = ReadText(base + ".txt");
  EXPECT_NE(text.find("mutations: shape-scale-element\n"), std::string::npos) << text;
  EXPECT_NE(text.find("repro: repro " + base + ".case --external=/lib/x.so\n"), std::string::npos) << text;
  EXPECT_NE(text.find("repro-sequence: repro --sequence " + base + ".sequence --external=/lib/x.so\n"),
            std::string::npos)
      << text;
  const std::vector<uint8_t> other = {5};
  path = WriteFinding("fuzz_x", other, Finding{"x/z", "d"});
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(ReadText(path->substr(0, path->size() - 5) + ".txt").find("mutations:"), std::string::npos);
}

// The driver end to end: a check that finds something only while a state it keeps is set (a
// stale device layer, say) reports flaky/..., and the inputs before it are on disk.
TEST_F(FindingsTest, TheDriverReportsAFindingThatAFreshStateDoesNotReproduceAsFlaky) {
  const std::vector<std::vector<uint8_t>> inputs = ThreeKnownInputs();
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_DEATH(
      {
        int seen = 0;
        bool stale = true;
        for (const std::vector<uint8_t>& input : inputs) {
          RunFuzzInput(
              "fuzz_x", input.data(), input.size(),
              [&](const FuzzCase&) {
                return ++seen == 3 && stale ? CheckResult(Finding{"mismatch/ordinary/x", "stale bits"})
                                            : CheckResult();
              },
              [&] { stale = false; });
        }
      },
      "FINDING flaky/mismatch/ordinary/x");
  size_t sequences = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    if (entry.path().extension() != ".sequence") continue;
    ++sequences;
    EXPECT_EQ(ReadText(entry.path() / "000.case"), std::string(inputs[0].begin(), inputs[0].end()));
    EXPECT_EQ(ReadText(entry.path() / "002.case"), std::string(inputs[2].begin(), inputs[2].end()));
  }
  EXPECT_EQ(sequences, 1u);
}

// Keep-going (MXDIFF_KEEP_GOING=1): the worker returns from each finding; the first input of each
// signature is written, every input is counted, and the counts are printed at exit.
TEST_F(FindingsTest, KeepGoingWritesEachSignatureOnceCountsEveryInputAndGoesOn) {
  const std::vector<std::vector<uint8_t>> inputs = ThreeKnownInputs();
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_EXIT(
      {
        setenv("MXDIFF_KEEP_GOING", "1", 1);
        int checked = 0;
        for (int round = 0; round < 3; ++round) {
          for (size_t which = 0; which < inputs.size(); ++which) {
            RunFuzzInput("fuzz_x", inputs[which].data(), inputs[which].size(), [&](const FuzzCase&) {
              ++checked;
              return which == 0 ? CheckResult(Finding{"mismatch/ordinary/a", "a"})
                     : which == 1 && round > 0 ? CheckResult(Finding{"mismatch/ordinary/b", "b"})
                                               : CheckResult();
            });
          }
        }
        // 9 inputs, and one fresh-state run for the first input of each signature.
        std::exit(checked == 11 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "kept going: 3 input\\(s\\) found mismatch/ordinary/a\n==mxdiff== kept going: 2 input\\(s\\) found "
      "mismatch/ordinary/b\n");
  std::vector<std::string> written;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    if (entry.path().extension() == ".txt") written.push_back(entry.path().filename());
  }
  std::sort(written.begin(), written.end());
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].rfind("fuzz_x.mismatch_ordinary_a.", 0), 0u) << written[0];
  EXPECT_EQ(written[1].rfind("fuzz_x.mismatch_ordinary_b.", 0), 0u) << written[1];
}

}  // namespace
}  // namespace mxdiff::fuzz
