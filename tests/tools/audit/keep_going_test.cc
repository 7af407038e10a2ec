// The audit after errors (issue 23, items 12-15), on checkpoints built by the tests: a report
// after an error without --keep-going judges nothing; with --keep-going, a tensor in two shards
// refuses its layer whatever the order of the files, the tensors the index puts in a shard
// that cannot be read refuse theirs, every problem of an index follows one rule
// (tools/audit/README.md), and a *.safetensors beside an index that it does not name is reported.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/audit/safetensors_builder.h"
#include "tools/audit/audit.h"
#include "tools/audit/layer_verdicts.h"

namespace mxdiff::audit {
namespace {

using nlohmann::json;
using testing::BuildFile;
using testing::TempDir;

AuditOptions KeepGoing(bool keep_going) {
  AuditOptions options;
  options.keep_going = keep_going;
  return options;
}

TEST(PartialReport, StoppedAuditJudgesNothingAndItsJsonHoldsNoVerdict) {
  TempDir dir;
  const std::string good = dir.Write("a.safetensors", BuildFile({{"layers.0.ffn.experts.0.w2.weight", "I8", {64, 16}},
                                                                 {"layers.0.ffn.experts.0.w2.scale", "F8_E8M0", {64, 1}}}));
  const std::string bad = dir.Write("b.safetensors", std::vector<uint8_t>{0, 1});
  const AuditResult stopped = RunAudit({good, bad}, KeepGoing(false));
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(ExitStatus(stopped), 2);
  EXPECT_FALSE(FindNoKernelLayer(stopped)) << "a stopped audit did not look for layers";
  const std::string report = JsonReport(stopped);
  EXPECT_EQ(json::parse(report)["partial"], true);
  const absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  EXPECT_FALSE(verdicts.ok());
  EXPECT_NE(verdicts.status().message().find("partial"), std::string_view::npos) << verdicts.status();

  const AuditResult kept = RunAudit({good, bad}, KeepGoing(true));
  EXPECT_FALSE(kept.stopped);
  EXPECT_EQ(json::parse(JsonReport(kept))["partial"], false);
  ASSERT_TRUE(ReadLayerVerdicts(JsonReport(kept)).ok());
}

const KernelLayer* FindLayer(const AuditResult& result, const std::string& name) {
  for (const KernelLayer& layer : result.plan.layers) {
    if (layer.name == name) return &layer;
  }
  return nullptr;
}

std::string LayerNames(const AuditResult& result) {
  std::string names;
  for (const KernelLayer& layer : result.plan.layers) names += " " + layer.name;
  return names.empty() ? " (none)" : names;
}

std::string AllProblems(const LayerVerdict& verdict) {
  std::string text;
  for (const LayerProblem& problem : verdict.problems) text += problem.tensor + ": " + problem.message + "\n";
  return text;
}

std::vector<uint8_t> ExpertW2(int layer, uint8_t fill, bool weight = true) {
  const std::string base = "layers." + std::to_string(layer) + ".ffn.experts.0.w2";
  std::vector<testing::TestTensor> tensors = {{base + ".scale", "F8_E8M0", {64, 1}, fill}};
  if (weight) tensors.insert(tensors.begin(), testing::TestTensor{base + ".weight", "I8", {64, 16}});
  return BuildFile(tensors);
}

// Issue 23, item 12: the verdict came from whichever copy was read first ("admitted" in the
// order 1, 2, 3 though the third file's copy holds 0xFF).
TEST(KeepGoing, ATensorInTwoFilesRefusesItsLayerWhateverTheOrder) {
  TempDir dir;
  const std::string one = dir.Write("one.safetensors", ExpertW2(1, 120));
  const std::string two = dir.Write("two.safetensors", ExpertW2(0, 120));
  const std::string three = dir.Write("three.safetensors", ExpertW2(1, 0xFF, /*weight=*/false));
  const std::string clean_copy = dir.Write("copy.safetensors", ExpertW2(1, 121, /*weight=*/false));
  for (const std::vector<std::string>& order :
       {std::vector{one, two, three}, std::vector{three, two, one}, std::vector{two, one, three}}) {
    const AuditResult result = RunAudit(order, KeepGoing(true));
    EXPECT_EQ(ExitStatus(result), 2);
    ASSERT_EQ(result.errors.size(), 1u);
    EXPECT_NE(result.errors[0].message.find("a tensor name may occur once"), std::string::npos);
    const KernelLayer* layer = FindLayer(result, "layers.1.ffn.experts.W2");
    ASSERT_NE(layer, nullptr) << "no layers.1.ffn.experts.W2 among" << LayerNames(result);
    const LayerVerdict verdict = JudgeLayer(result, *layer);
    EXPECT_FALSE(verdict.admitted) << order[0];
    ASSERT_FALSE(verdict.problems.empty()) << order[0];
    EXPECT_EQ(verdict.problems[0].tensor, "layers.1.ffn.experts.0.w2.scale");
    EXPECT_NE(verdict.problems[0].message.find("in 2 files ("), std::string::npos) << AllProblems(verdict);
    for (const std::string& file : {one, three}) {
      EXPECT_NE(verdict.problems[0].message.find(file), std::string::npos) << file << " unnamed in " << AllProblems(verdict);
    }
    // Both copies are judged: the 0xFF bytes are located in the copy that holds them.
    EXPECT_EQ(verdict.refused_bytes, 64u);
    ASSERT_FALSE(verdict.first_refused.empty());
    EXPECT_EQ(verdict.first_refused[0].raw, 0xFF);
    EXPECT_EQ(result.checkpoint.files[result.plan.scales[verdict.first_refused[0].scale].ref.file].path, three);
    EXPECT_EQ(layer->groups, 0) << "a refused-for-structure layer has no shape to prepare";
    // The other layer is not touched.
    const KernelLayer* other = FindLayer(result, "layers.0.ffn.experts.W2");
    ASSERT_NE(other, nullptr) << LayerNames(result);
    EXPECT_TRUE(JudgeLayer(result, *other).admitted);
    // The JSON names the file of each refused byte.
    const json report = json::parse(JsonReport(result));
    bool located = false;
    for (const json& entry : report["layers"]) {
      if (entry["name"] == "layers.1.ffn.experts.W2") located = entry["first_refused"][0]["file"] == three;
    }
    EXPECT_TRUE(located) << report["layers"].dump();
  }
  // Two copies with admitted bytes: still refused (which copy a loader takes is not defined).
  const AuditResult both_clean = RunAudit({one, clean_copy}, KeepGoing(true));
  const KernelLayer* layer = FindLayer(both_clean, "layers.1.ffn.experts.W2");
  ASSERT_NE(layer, nullptr) << LayerNames(both_clean);
  EXPECT_FALSE(JudgeLayer(both_clean, *layer).admitted);
  // A weight in two files refuses the layer of its scale.
  const std::string weight_copy =
      dir.Write("weight.safetensors", BuildFile({{"layers.1.ffn.experts.0.w2.weight", "I8", {64, 16}}}));
  const AuditResult weights = RunAudit({weight_copy, one}, KeepGoing(true));
  const KernelLayer* weight_layer = FindLayer(weights, "layers.1.ffn.experts.W2");
  ASSERT_NE(weight_layer, nullptr) << LayerNames(weights);
  const LayerVerdict weight_verdict = JudgeLayer(weights, *weight_layer);
  EXPECT_FALSE(weight_verdict.admitted);
  EXPECT_NE(AllProblems(weight_verdict).find("its weight \"layers.1.ffn.experts.0.w2.weight\" is in 2 files"),
            std::string::npos)
      << AllProblems(weight_verdict);
}

}  // namespace
}  // namespace mxdiff::audit
