// The gate's verdict rule and its report (issue 18, items 7 and 8), on the CPU.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/gate/gate_report.h"
#include "tools/gate/gate_verdict.h"

namespace mxdiff::gate {
namespace {

std::vector<StepResult> AllPassed() {
  std::vector<StepResult> steps;
  for (int step = 0; step < kGateSteps; ++step) {
    steps.push_back({GateStep(step), StepOutcome::kPassed, "ok", fmt::format("command {}", step)});
  }
  return steps;
}

TEST(GateVerdictTest, MergeOnlyWhenEveryStepRanAndPassed) {
  const GateDecision decision = DecideGate(AllPassed());
  EXPECT_EQ(decision.verdict, GateVerdict::kMerge);
  EXPECT_EQ(decision.exit_status, 0);
  EXPECT_EQ(decision.reason, "every step ran and passed");
}

TEST(GateVerdictTest, AFailureIsDoNotMergeWhateverCouldNotRun) {
  std::vector<StepResult> steps = AllPassed();
  steps[3] = {GateStep::kExactness, StepOutcome::kFailed, "W2 element [0][5] 0x3c00 vs 0x3c01", "c"};
  steps[4] = {GateStep::kSpeed, StepOutcome::kSkipped, "no GPU", "c"};
  const GateDecision decision = DecideGate(steps);
  EXPECT_EQ(decision.verdict, GateVerdict::kDoNotMerge);
  EXPECT_EQ(decision.exit_status, 1);
  EXPECT_EQ(decision.reason, "failed: exactness (W2 element [0][5] 0x3c00 vs 0x3c01)");
}

TEST(GateVerdictTest, AStepThatCouldNotRunOrDecideIsInconclusive) {
  std::vector<StepResult> steps = AllPassed();
  steps[3].outcome = StepOutcome::kSkipped;
  steps[3].summary = "no GPU";
  steps[4].outcome = StepOutcome::kNoVerdict;
  steps[4].summary = "too-noisy";
  const GateDecision decision = DecideGate(steps);
  EXPECT_EQ(decision.verdict, GateVerdict::kInconclusive);
  EXPECT_EQ(decision.exit_status, 3);
  EXPECT_EQ(decision.reason, "not decided: exactness skipped (no GPU); speed no-verdict (too-noisy)");
}

TEST(GateVerdictTest, AMissingOrRepeatedStepIsNeverAMerge) {
  std::vector<StepResult> steps = AllPassed();
  steps.pop_back();
  EXPECT_EQ(DecideGate(steps).verdict, GateVerdict::kInconclusive);
  EXPECT_EQ(DecideGate(steps).reason, "not decided: speed not run");
  steps.push_back(steps[0]);
  steps.push_back({GateStep::kSpeed, StepOutcome::kPassed, "ok", "c"});
  EXPECT_EQ(DecideGate(steps).reason, "not decided: audit given 2 times");
  EXPECT_EQ(DecideGate({}).verdict, GateVerdict::kInconclusive);
}

TEST(GateVerdictTest, SpeedFromTheBenchVerdict) {
  EXPECT_EQ(SpeedOutcome(bench::Verdict::kFaster), StepOutcome::kPassed);
  EXPECT_EQ(SpeedOutcome(bench::Verdict::kSlower), StepOutcome::kFailed);
  EXPECT_EQ(SpeedOutcome(bench::Verdict::kBitMismatch), StepOutcome::kFailed);
  for (bench::Verdict undecided : {bench::Verdict::kUnresolved, bench::Verdict::kTooNoisy,
                                   bench::Verdict::kPositionEffect, bench::Verdict::kIncomplete}) {
    EXPECT_EQ(SpeedOutcome(undecided), StepOutcome::kNoVerdict) << bench::VerdictName(undecided);
  }
}

GateReport Sample() {
  GateReport report;
  report.checkpoint = "ckpt/\xff.safetensors";
  report.tool_commit = "0123abc";
  report.admission_rule = "fold-bitwise-equal-all-codes/113..128/fnv1a64:9f02fa391edcbadc";
  report.seeds = {{"exactness", 20261205}};
  report.steps = AllPassed();
  report.steps[4] = {GateStep::kSpeed, StepOutcome::kSkipped, "no GPU", "mxdiff bench --arms=ordinary,folded"};
  report.decision = DecideGate(report.steps);
  return report;
}

TEST(GateReportTest, JsonSchemaHoldsTheDecisionTheStepsAndTheProvenance) {
  // A path is bytes: one that is not UTF-8 keeps them (checkpoint/json_bytes.h), which nlohmann
  // itself does not read back; Python's json module does.
  EXPECT_NE(GateReportJson(Sample()).find(R"("checkpoint": "ckpt/\udcff.safetensors")"), std::string::npos);
  GateReport utf8 = Sample();
  utf8.checkpoint = "ckpt/";
  const nlohmann::json json = nlohmann::json::parse(GateReportJson(utf8));
  EXPECT_EQ(json["schema"], "mxdiff-gate/1");
  EXPECT_EQ(json["verdict"], "INCONCLUSIVE");
  EXPECT_EQ(json["exit_status"], 3);
  EXPECT_EQ(json["reason"], "not decided: speed skipped (no GPU)");
  EXPECT_EQ(json["checkpoint"], "ckpt/");
  EXPECT_EQ(json["tool_commit"], "0123abc");
  EXPECT_EQ(json["admission_rule"], "fold-bitwise-equal-all-codes/113..128/fnv1a64:9f02fa391edcbadc");
  EXPECT_EQ(json["gpu"], "");
  EXPECT_EQ(json["seeds"]["exactness"], 20261205);
  ASSERT_EQ(json["steps"].size(), 5u);
  EXPECT_EQ(json["steps"][4], (nlohmann::json{{"step", "speed"},
                                              {"outcome", "skipped"},
                                              {"summary", "no GPU"},
                                              {"details", nlohmann::json::array()},
                                              {"command", "mxdiff bench --arms=ordinary,folded"},
                                              {"seconds", 0.0}}));
  EXPECT_EQ(json["notes"], nlohmann::json::array());
  EXPECT_EQ(json["figures"], nlohmann::json::array());
}

TEST(GateReportTest, MarkdownHasTheVerdictFirstAndASectionPerStep) {
  const std::string text = GateReportMarkdown(Sample());
  EXPECT_EQ(text.rfind("# mxdiff gate: INCONCLUSIVE\n\nnot decided: speed skipped (no GPU)\n", 0), 0u) << text;
  EXPECT_NE(text.find("- GPU: none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n## speed: skipped (0.0 s)\n\nno GPU\n\n    mxdiff bench --arms=ordinary,folded\n"),
            std::string::npos)
      << text;
}

TEST(GateReportTest, WrittenWholeIntoAnExistingFolderOnly) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "mxdiff_gate_report_test";
  std::filesystem::remove_all(dir);
  EXPECT_EQ(WriteGateReport(dir.string(), Sample()).code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteGateReport(dir.string(), Sample()).ok());
  std::stringstream json, markdown;
  json << std::ifstream(dir / "report.json").rdbuf();
  markdown << std::ifstream(dir / "report.md").rdbuf();
  EXPECT_EQ(json.str(), GateReportJson(Sample()));
  EXPECT_EQ(markdown.str(), GateReportMarkdown(Sample()));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"report.json", "report.md"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mxdiff::gate
