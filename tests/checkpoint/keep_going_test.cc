// The audit after errors (issue 23, items 12-15), on checkpoints built by the tests: a report
// after an error without --keep-going judges nothing; with --keep-going, a tensor in two shards
// refuses its layer whatever the order of the files, the tensors the index puts in a shard
// that cannot be read refuse theirs, every problem of an index follows one rule
// (checkpoint/README.md), and a *.safetensors beside an index that it does not name is reported.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/checkpoint/safetensors_builder.h"
#include "checkpoint/audit.h"
#include "checkpoint/layer_verdicts.h"

namespace mxdiff::checkpoint {
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

// The report's schema is written and required through one constant: another value is refused.
TEST(ReportSchema, WrittenAndReadThroughOneConstant) {
  TempDir dir;
  const std::string file = dir.Write("a.safetensors", BuildFile({{"layers.0.ffn.experts.0.w2.weight", "I8", {64, 16}},
                                                                 {"layers.0.ffn.experts.0.w2.scale", "F8_E8M0", {64, 1}}}));
  json report = json::parse(JsonReport(RunAudit({file}, KeepGoing(false))));
  EXPECT_EQ(report["schema"], std::string(kAuditReportSchema));
  ASSERT_TRUE(ReadLayerVerdicts(report.dump()).ok());
  report["schema"] = "mxdiff-audit/0";
  const absl::StatusOr<std::vector<AuditedLayerVerdict>> other = ReadLayerVerdicts(report.dump());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find(std::string(kAuditReportSchema)), absl::string_view::npos) << other.status();
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

// Routed experts' w2 (weight and scale) of `layer`, experts [first, first + count).
std::vector<testing::TestTensor> W2Tensors(int layer, int first, int count, bool weights = true, bool scales = true) {
  std::vector<testing::TestTensor> tensors;
  for (int e = first; e < first + count; ++e) {
    const std::string base = "layers." + std::to_string(layer) + ".ffn.experts." + std::to_string(e) + ".w2";
    if (weights) tensors.push_back({base + ".weight", "I8", {64, 16}});
    if (scales) tensors.push_back({base + ".scale", "F8_E8M0", {64, 1}});
  }
  return tensors;
}

std::vector<testing::TestTensor> Join(std::vector<std::vector<testing::TestTensor>> parts) {
  std::vector<testing::TestTensor> all;
  for (auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// An index putting `tensors` of each shard there, written with the shards into `folder`.
std::string WriteSharded(const TempDir& dir, const std::string& folder,
                         const std::vector<std::pair<std::string, std::vector<testing::TestTensor>>>& shards,
                         const std::vector<std::string>& unreadable = {}) {
  json weight_map = json::object();
  for (const auto& [shard, tensors] : shards) {
    for (const testing::TestTensor& tensor : tensors) weight_map[tensor.name] = shard;
    if (std::find(unreadable.begin(), unreadable.end(), shard) != unreadable.end()) {
      dir.Write(folder + "/" + shard, std::vector<uint8_t>{1, 2, 3});  // truncated before the header length
    } else {
      dir.Write(folder + "/" + shard, BuildFile(tensors));
    }
  }
  return dir.Write(folder + "/model.safetensors.index.json", json({{"weight_map", weight_map}}).dump());
}

struct Judged {
  bool present = false;
  bool admitted = false;
  std::vector<std::string> unread;
  std::string problems;
};

Judged Judge(const AuditResult& result, const std::string& name) {
  const KernelLayer* layer = FindLayer(result, name);
  if (layer == nullptr) return {};
  const LayerVerdict verdict = JudgeLayer(result, *layer);
  return {true, verdict.admitted, layer->unread, AllProblems(verdict)};
}

// Issue 23, item 13: an unreadable shard's layers vanished from `layers` ("8 admitted, 0
// refused") though the index names their tensors. They are refused, and listed.
TEST(KeepGoing, TheLayersOfAnUnreadableShardAreRefusedNotDropped) {
  TempDir dir;
  const auto first = Join({W2Tensors(0, 0, 2), W2Tensors(2, 0, 2, true, false), W2Tensors(3, 0, 1, false, true)});
  const auto second = Join({W2Tensors(1, 0, 2), W2Tensors(2, 0, 2, false, true), W2Tensors(3, 0, 1, true, false)});
  const std::string index = WriteSharded(dir, "ckpt", {{"a.safetensors", first}, {"b.safetensors", second}},
                                         {"b.safetensors"});
  const AuditResult result = RunAudit({dir.path() + "/ckpt"}, KeepGoing(true));
  EXPECT_EQ(ExitStatus(result), 2);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_NE(result.errors[0].message.find("b.safetensors: truncated"), std::string::npos) << result.errors[0].message;
  EXPECT_TRUE(Judge(result, "layers.0.ffn.experts.W2").admitted) << LayerNames(result);
  // Every scale in the unreadable shard: the layer is there, refused, its tensors listed.
  const Judged whole = Judge(result, "layers.1.ffn.experts.W2");
  ASSERT_TRUE(whole.present) << LayerNames(result);
  EXPECT_FALSE(whole.admitted);
  EXPECT_EQ(whole.unread, (std::vector<std::string>{"layers.1.ffn.experts.0.w2.scale", "layers.1.ffn.experts.1.w2.scale"}));
  EXPECT_NE(whole.problems.find("but its shard " + dir.path() + "/ckpt/b.safetensors could not be read"),
            std::string::npos)
      << whole.problems;
  EXPECT_NE(whole.problems.find(index), std::string::npos) << whole.problems;
  // Scales there, weights here: refused as well.
  const Judged scales = Judge(result, "layers.2.ffn.experts.W2");
  ASSERT_TRUE(scales.present) << LayerNames(result);
  EXPECT_FALSE(scales.admitted);
  EXPECT_EQ(scales.unread.size(), 2u);
  // The scale read, its weight in the unreadable shard: refused for it.
  const Judged weight = Judge(result, "layers.3.ffn.experts.W2");
  ASSERT_TRUE(weight.present) << LayerNames(result);
  EXPECT_FALSE(weight.admitted);
  EXPECT_NE(weight.problems.find("its weight \"layers.3.ffn.experts.0.w2.weight\" was not read"), std::string::npos)
      << weight.problems;
  // The report counts and lists them.
  const std::string text = TextReport(result);
  EXPECT_NE(text.find("kernel layers: 1 admitted, 3 refused"), std::string::npos) << text;
  const json report = json::parse(JsonReport(result));
  EXPECT_EQ(report["summary"]["refused_layers"], 3);
  for (const json& layer : report["layers"]) {
    if (layer["name"] == "layers.1.ffn.experts.W2") {
      EXPECT_EQ(layer["unread_tensors"].size(), 2u);
    }
  }
  ASSERT_TRUE(ReadLayerVerdicts(JsonReport(result)).ok());
}

// Issue 23, item 14: one rule for every problem of an index (checkpoint/README.md): with
// --keep-going the audit goes on with what can be read, a tensor the index names that cannot
// be read refuses its layer, and an index that cannot be read at all leaves the folder's files.
TEST(KeepGoing, IndexNamingAShardOutsideItsFolder) {
  TempDir dir;
  dir.Write("outside.safetensors", BuildFile(W2Tensors(1, 0, 1)));
  dir.Write("ckpt/a.safetensors", BuildFile(W2Tensors(0, 0, 1)));
  const std::string index = dir.Write("ckpt/model.safetensors.index.json", json({{"weight_map", {
      {"layers.0.ffn.experts.0.w2.weight", "a.safetensors"}, {"layers.0.ffn.experts.0.w2.scale", "a.safetensors"},
      {"layers.1.ffn.experts.0.w2.weight", "../outside.safetensors"},
      {"layers.1.ffn.experts.0.w2.scale", "../outside.safetensors"}}}}).dump());
  const AuditResult result = RunAudit({index}, KeepGoing(true));
  EXPECT_EQ(ExitStatus(result), 2);
  ASSERT_EQ(result.errors.size(), 2u);  // one per entry
  for (const AuditError& error : result.errors) {
    EXPECT_NE(error.message.find("not a file name inside the index's folder"), std::string::npos) << error.message;
  }
  EXPECT_TRUE(Judge(result, "layers.0.ffn.experts.W2").admitted) << LayerNames(result);
  const Judged outside = Judge(result, "layers.1.ffn.experts.W2");
  ASSERT_TRUE(outside.present) << LayerNames(result);
  EXPECT_FALSE(outside.admitted);
  EXPECT_EQ(outside.unread, std::vector<std::string>{"layers.1.ffn.experts.0.w2.scale"});
  // Without --keep-going: the first error, a partial report.
  const AuditResult stopped = RunAudit({index}, KeepGoing(false));
  EXPECT_EQ(stopped.errors.size(), 1u);
  EXPECT_TRUE(stopped.stopped);
}

TEST(KeepGoing, IndexThatIsNotValidLeavesTheFolderFiles) {
  TempDir dir;
  dir.Write("ckpt/a.safetensors", BuildFile(W2Tensors(0, 0, 2)));
  dir.Write("ckpt/b.safetensors", BuildFile(W2Tensors(1, 0, 2)));
  for (const std::string& text : {std::string(R"({"weight_map":)"), std::string(R"({"metadata":{}})"),
                                  std::string(R"({"weight_map":{"x":"a.safetensors","x":"b.safetensors"}})")}) {
    const std::string index = dir.Write("ckpt/model.safetensors.index.json", text);
    for (const std::string& path : {index, dir.path() + "/ckpt"}) {
      const AuditResult result = RunAudit({path}, KeepGoing(true));
      EXPECT_EQ(ExitStatus(result), 2) << text;
      ASSERT_EQ(result.errors.size(), 1u) << text;
      EXPECT_EQ(result.errors[0].file, index);
      EXPECT_EQ(result.checkpoint.files.size(), 2u) << text << ": the folder's files are audited";
      EXPECT_TRUE(Judge(result, "layers.0.ffn.experts.W2").admitted) << text << LayerNames(result);
      EXPECT_TRUE(Judge(result, "layers.1.ffn.experts.W2").admitted) << text << LayerNames(result);
      const AuditResult stopped = RunAudit({path}, KeepGoing(false));
      EXPECT_TRUE(stopped.stopped) << text;
      EXPECT_TRUE(stopped.checkpoint.files.empty()) << text;
    }
  }
}

TEST(KeepGoing, IndexNamingAMissingShardOrATensorItsShardLacks) {
  TempDir dir;
  const auto a = W2Tensors(0, 0, 2);
  const auto b = W2Tensors(1, 0, 2);
  const std::string index = WriteSharded(dir, "ckpt", {{"a.safetensors", a}, {"b.safetensors", b}});
  std::filesystem::remove(dir.path() + "/ckpt/b.safetensors");
  // And one tensor the index puts in a.safetensors that is not there: layer 2's only scale.
  json parsed = json::parse(std::ifstream(index));
  parsed["weight_map"]["layers.2.ffn.experts.0.w2.scale"] = "a.safetensors";
  dir.Write("ckpt/model.safetensors.index.json", parsed.dump());
  const AuditResult result = RunAudit({index}, KeepGoing(true));
  EXPECT_EQ(ExitStatus(result), 2);
  EXPECT_EQ(result.errors.size(), 2u);
  EXPECT_TRUE(Judge(result, "layers.0.ffn.experts.W2").admitted) << LayerNames(result);
  const Judged missing = Judge(result, "layers.1.ffn.experts.W2");
  ASSERT_TRUE(missing.present) << LayerNames(result);
  EXPECT_FALSE(missing.admitted);
  EXPECT_NE(missing.problems.find("b.safetensors is missing"), std::string::npos) << missing.problems;
  const Judged lacking = Judge(result, "layers.2.ffn.experts.W2");
  ASSERT_TRUE(lacking.present) << LayerNames(result);
  EXPECT_FALSE(lacking.admitted);
  EXPECT_NE(lacking.problems.find("which has no such tensor"), std::string::npos) << lacking.problems;
}

// Found by fuzz_safetensors' bundle checks: a tensor the index puts in a missing shard is unread
// even where another shard holds a copy of it, and that copy is an error of its own: the index and
// its shards must agree both ways.
TEST(KeepGoing, ATensorTheIndexPutsInAMissingShardIsUnreadThoughAnotherShardHoldsACopy) {
  for (const std::string moved : {"layers.0.ffn.experts.0.w2.weight", "layers.0.ffn.experts.0.w2.scale"}) {
    TempDir dir;
    dir.Write("ckpt/b.safetensors", BuildFile(W2Tensors(0, 0, 1)));
    json weight_map = json::object();
    for (const testing::TestTensor& tensor : W2Tensors(0, 0, 1)) weight_map[tensor.name] = "b.safetensors";
    weight_map[moved] = "a.safetensors";
    const std::string index =
        dir.Write("ckpt/model.safetensors.index.json", json({{"weight_map", weight_map}}).dump());
    const AuditResult result = RunAudit({index}, KeepGoing(true));
    EXPECT_EQ(ExitStatus(result), 2) << moved;
    std::string errors;
    for (const AuditError& error : result.errors) errors += error.message + "\n";
    EXPECT_NE(errors.find("a.safetensors\" is missing"), std::string::npos) << moved << "\n" << errors;
    EXPECT_NE(errors.find(fmt::format("tensor \"{}\": the index puts it in \"a.safetensors\", not here", moved)),
              std::string::npos)
        << moved << "\n" << errors;
    const Judged layer = Judge(result, "layers.0.ffn.experts.W2");
    ASSERT_TRUE(layer.present) << moved << LayerNames(result);
    EXPECT_FALSE(layer.admitted) << moved;
    EXPECT_NE(layer.problems.find("a.safetensors is missing"), std::string::npos) << moved << "\n" << layer.problems;
    EXPECT_NE(TextReport(result).find("kernel layers: 0 admitted, 1 refused"), std::string::npos) << TextReport(result);
  }
}

// Found by fuzz_safetensors (invariant/json-reads-back): an index that is not valid JSON is quoted
// in its error with the bytes it holds; the report escapes those that are not UTF-8, and the
// verdicts must still read back for the kernels' PrepareAudited.
TEST(KeepGoing, AReportQuotingBytesThatAreNotUtf8ReadsBack) {
  TempDir dir;
  dir.Write("ckpt/a.safetensors", BuildFile(W2Tensors(0, 0, 1)));
  dir.Write("ckpt/model.safetensors.index.json", std::string("{\"weight_map\": {\"x\": \xa0}}"));
  const AuditResult result = RunAudit({dir.path() + "/ckpt"}, KeepGoing(true));
  ASSERT_EQ(result.errors.size(), 1u);
  const std::string report = JsonReport(result);
  EXPECT_NE(report.find("\\udca0"), std::string::npos) << report;
  const absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  ASSERT_TRUE(verdicts.ok()) << verdicts.status();
  ASSERT_EQ(verdicts->size(), 1u);
  EXPECT_EQ((*verdicts)[0].layer, "layers.0.ffn.experts.W2");
  EXPECT_TRUE((*verdicts)[0].admitted);
}

// Issue 23, item 15: a file beside an index that the index does not name is reported and
// audited on its own, once, and not at all apart when it is a PATH of the audit itself.
TEST(Unindexed, AFileBesideTheIndexIsAuditedApartOnce) {
  TempDir dir;
  WriteSharded(dir, "ckpt", {{"a.safetensors", W2Tensors(0, 0, 1)}});
  const std::string stray = dir.Write("ckpt/stray.safetensors", BuildFile(W2Tensors(0, 0, 1)));  // the same names
  const AuditResult result = RunAudit({dir.path() + "/ckpt", dir.path() + "/ckpt/"}, KeepGoing(false));
  EXPECT_TRUE(result.errors.empty()) << result.errors.front().message;
  ASSERT_EQ(result.unindexed.size(), 1u);
  EXPECT_EQ(result.unindexed[0].file.file, stray);
  EXPECT_EQ(result.unindexed[0].file.also_in_index, 2u);
  EXPECT_EQ(result.unindexed[0].file.tensors, 2u);
  EXPECT_EQ(result.unindexed[0].layers, 1u);
  EXPECT_EQ(ExitStatus(result), 0);
  // Named as a PATH, it is part of the checkpoint (and here a duplicate of the index's names).
  const AuditResult named = RunAudit({dir.path() + "/ckpt", stray}, KeepGoing(true));
  EXPECT_TRUE(named.unindexed.empty());
  EXPECT_EQ(named.checkpoint.files.size(), 2u);
  EXPECT_EQ(ExitStatus(named), 2);
}

}  // namespace
}  // namespace mxdiff::checkpoint
