// The audit on checkpoints the official safetensors package wrote (write_fixtures.py): the
// verdict per kernel layer, every histogram against numpy's, the planted bytes at their
// positions, the MX-spec deviations, the JSON report read back into verdicts that
// CheckAuditedVerdict accepts for the layers' bytes, and independence from threads and chunks.
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "checkpoint/audit.h"
#include "checkpoint/layer_verdicts.h"

namespace mxdiff::checkpoint {
namespace {

using nlohmann::json;

const std::string kFixtures = MXDIFF_AUDIT_FIXTURES;

json Expected() {
  std::ifstream stream(kFixtures + "/expected.json");
  EXPECT_TRUE(stream) << kFixtures << "/expected.json is missing: the ctest fixture audit_write_fixtures writes it";
  return stream ? json::parse(stream) : json::object();
}

const KernelLayer* FindLayer(const AuditResult& result, const std::string& name) {
  for (const KernelLayer& layer : result.plan.layers) {
    if (layer.name == name) return &layer;
  }
  return nullptr;
}

// Into plan.scales, only for a scale tensor that was scanned too (so scan.tensors[s] exists).
std::optional<size_t> FindScale(const AuditResult& result, const std::string& name) {
  for (size_t s = 0; s < result.plan.scales.size() && s < result.scan.tensors.size(); ++s) {
    if (result.plan.scales[s].name == name) return s;
  }
  return std::nullopt;
}

// What a test looked for and did not find, with what the audit has instead: every lookup is
// checked (ASSERT) before it is used, so a missing layer fails the test instead of crashing it.
std::string Missing(const AuditResult& result, std::string_view what, const std::string& name) {
  std::string text = fmt::format("no {} {} in the audit; it has {} kernel layers:", what, name, result.plan.layers.size());
  for (const KernelLayer& layer : result.plan.layers) text += " " + layer.name;
  text += fmt::format("; {} scale tensors, {} scanned; errors:", result.plan.scales.size(), result.scan.tensors.size());
  for (const AuditError& error : result.errors) text += "\n  " + error.message;
  return text;
}

ScaleHistogram HistogramOfJson(const json& bins) {
  ScaleHistogram histogram{};
  if (bins.is_array()) {
    for (size_t i = 0; i < 256; ++i) histogram[i] = bins[i].get<uint64_t>();
  } else {
    for (const auto& [raw, count] : bins.items()) histogram[std::stoi(raw)] = count.get<uint64_t>();
  }
  return histogram;
}

AuditResult Audit(const std::vector<std::string>& paths, int threads = 0, uint64_t chunk_bytes = 8u << 20) {
  AuditOptions options;
  options.scan.threads = threads;
  options.scan.chunk_bytes = chunk_bytes;
  return RunAudit(paths, options);
}

TEST(AuditFixture, DeepSeekVerdictsPerKernelLayer) {
  const AuditResult result = Audit({kFixtures + "/deepseek"});
  for (const AuditError& error : result.errors) ADD_FAILURE() << error.message;
  EXPECT_EQ(result.checkpoint.files.size(), 3u);
  EXPECT_EQ(ExitStatus(result), 1);
  std::map<std::string, bool> verdicts;
  for (const KernelLayer& layer : result.plan.layers) verdicts[layer.name] = JudgeLayer(result, layer).admitted;
  std::map<std::string, bool> expected;
  for (int layer = 0; layer < 4; ++layer) {
    for (const char* kind : {"experts.W13", "experts.W2"}) {  // the shared expert is their last group
      expected[fmt::format("layers.{}.ffn.{}", layer, kind)] = true;
    }
  }
  expected["layers.1.ffn.experts.W13"] = false;  // raw 112
  expected["layers.2.ffn.experts.W2"] = false;   // raw 0xFF
  expected["layers.3.ffn.experts.W2"] = false;   // a scale shape that disagrees with its weight
  EXPECT_EQ(verdicts, expected);
  const KernelLayer* w13 = FindLayer(result, "layers.0.ffn.experts.W13");
  ASSERT_NE(w13, nullptr) << Missing(result, "kernel layer", "layers.0.ffn.experts.W13");
  EXPECT_EQ(std::tuple(w13->groups, w13->n, w13->k), std::tuple(5, 128, 256));
  const KernelLayer* w2 = FindLayer(result, "layers.0.ffn.experts.W2");
  ASSERT_NE(w2, nullptr) << Missing(result, "kernel layer", "layers.0.ffn.experts.W2");
  EXPECT_EQ(std::tuple(w2->groups, w2->n, w2->k), std::tuple(5, 256, 64));
  // The shape mismatch is reported on its tensor, not guessed around.
  const KernelLayer* mismatched = FindLayer(result, "layers.3.ffn.experts.W2");
  ASSERT_NE(mismatched, nullptr) << Missing(result, "kernel layer", "layers.3.ffn.experts.W2");
  const LayerVerdict mismatch = JudgeLayer(result, *mismatched);
  ASSERT_EQ(mismatch.problems.size(), 1u);
  EXPECT_EQ(mismatch.problems[0].tensor, "layers.3.ffn.experts.1.w2.scale");
  EXPECT_NE(mismatch.problems[0].message.find("disagrees with weight"), std::string::npos) << mismatch.problems[0].message;
  EXPECT_EQ(mismatch.refused_bytes, 0u);
  // The FP8 attention weight's block scales are in no kernel layer.
  const std::optional<size_t> attention_index = FindScale(result, "layers.0.attn.wq_a.scale");
  ASSERT_TRUE(attention_index) << Missing(result, "scale tensor", "layers.0.attn.wq_a.scale");
  const ScaleTensor& attention = result.plan.scales[*attention_index];
  EXPECT_EQ(attention.layer, -1);
  EXPECT_NE(attention.note.find("F8_E4M3"), std::string::npos) << attention.note;
}

TEST(AuditFixture, HistogramsEqualNumpysForEveryTensorAndLayer) {
  const json expected = Expected();
  ASSERT_TRUE(expected.contains("tensors") && expected.contains("layers")) << "expected.json lacks tensors or layers";
  for (const std::string input : {"/deepseek", "/gptoss.safetensors"}) {
    const AuditResult result = Audit({kFixtures + input});
    for (const auto& [name, tensor] : expected["tensors"].items()) {
      const bool in_this_input = (input == "/deepseek") == name.starts_with("layers.");
      if (!in_this_input) continue;
      const std::optional<size_t> s = FindScale(result, name);
      ASSERT_TRUE(s) << Missing(result, "scale tensor", name);
      EXPECT_EQ(result.scan.tensors[*s].Dense(), HistogramOfJson(tensor["histogram"])) << name;
      const ScaleTensor& scale = result.plan.scales[*s];
      EXPECT_EQ(scale.layer >= 0 ? json(result.plan.layers[size_t(scale.layer)].name) : json(nullptr), tensor["layer"])
          << name;
    }
    for (const auto& [name, layer] : expected["layers"].items()) {
      const bool in_this_input = (input == "/deepseek") == name.starts_with("layers.");
      if (!in_this_input) continue;
      const KernelLayer* kernel_layer = FindLayer(result, name);
      ASSERT_NE(kernel_layer, nullptr) << Missing(result, "kernel layer", name);
      EXPECT_EQ(JudgeLayer(result, *kernel_layer).histogram, HistogramOfJson(layer["histogram"])) << name;
      EXPECT_EQ(kernel_layer->members.size(), layer["tensors"].size()) << name;
    }
  }
}

TEST(AuditFixture, PlantedBytesAtTheirPositionsWithTheirDeviations) {
  const json expected = Expected();
  std::map<std::string, AuditResult> results;
  results.emplace("deepseek", Audit({kFixtures + "/deepseek"}));
  results.emplace("gptoss", Audit({kFixtures + "/gptoss.safetensors"}));
  ASSERT_TRUE(expected.contains("planted")) << "expected.json lacks planted";
  ASSERT_EQ(expected["planted"].size(), 3u);
  for (const json& planted : expected["planted"]) {
    const std::string tensor = planted["tensor"];
    const AuditResult& result = results.at(tensor.starts_with("layers.") ? "deepseek" : "gptoss");
    const std::optional<size_t> found = FindScale(result, tensor);
    ASSERT_TRUE(found) << Missing(result, "scale tensor", tensor);
    const size_t s = *found;
    const TensorScan& scan = result.scan.tensors[s];
    const TensorInfo& info = result.checkpoint.tensor(result.plan.scales[s].ref);
    const uint8_t raw = planted["raw"];
    EXPECT_EQ(scan.refused, 1u) << tensor;
    ASSERT_EQ(scan.first_refused.size(), 1u) << tensor;
    EXPECT_EQ(scan.first_refused[0].raw, raw);
    EXPECT_EQ(Coordinates(scan.first_refused[0].index, info.shape), planted["position"].get<std::vector<uint64_t>>());
    // The layer reports it at the tensor's offset in kernel order.
    const KernelLayer* layer = FindLayer(result, planted["layer"]);
    ASSERT_NE(layer, nullptr) << Missing(result, "kernel layer", planted["layer"]);
    const LayerVerdict verdict = JudgeLayer(result, *layer);
    EXPECT_FALSE(verdict.admitted);
    ASSERT_EQ(verdict.first_refused.size(), 1u) << planted["layer"];
    EXPECT_EQ(verdict.first_refused[0].layer_index, result.plan.scales[s].layer_offset + scan.first_refused[0].index);
    // Which deviation the ordinary kernel makes there, by reference/mx_spec.h.
    const uint8_t deviations = OrdinaryDeviations()[raw];
    const uint8_t wanted = raw == 112   ? 1u << int(SpecDeviation::kFlushedToZero)
                           : raw == 255 ? 1u << int(SpecDeviation::kNaNDropped)
                                        : 0u;  // 129: refused by the fold rule, exact for the ordinary kernel
    EXPECT_EQ(deviations, wanted) << "raw " << int(raw);
  }
  // Layer 1 W13: expert 2's w3 follows experts 0 and 1 (w1 and w3 each) and expert 2's w1.
  const AuditResult& deepseek = results.at("deepseek");
  const KernelLayer* layer_1_w13 = FindLayer(deepseek, "layers.1.ffn.experts.W13");
  ASSERT_NE(layer_1_w13, nullptr) << Missing(deepseek, "kernel layer", "layers.1.ffn.experts.W13");
  const LayerVerdict w13 = JudgeLayer(deepseek, *layer_1_w13);
  ASSERT_FALSE(w13.first_refused.empty()) << "layers.1.ffn.experts.W13 has no refused byte";
  EXPECT_EQ(w13.first_refused[0].layer_index, (2 * 2 + 1) * 64 * 8 + 5 * 8 + 3);
}

TEST(AuditFixture, OrdinaryDeviationsAsTheKernelContractSays) {
  const std::array<uint8_t, 256>& deviations = OrdinaryDeviations();
  auto has = [&](int raw, SpecDeviation d) { return (deviations[raw] >> int(d) & 1) != 0; };
  for (int raw = 0; raw <= 112; ++raw) EXPECT_TRUE(has(raw, SpecDeviation::kFlushedToZero)) << raw;
  for (int raw = 113; raw <= 128; ++raw) EXPECT_EQ(deviations[raw], 0) << raw;
  EXPECT_FALSE(has(142, SpecDeviation::kSaturated));  // a = 30 is still exact at raw 142
  for (int raw = 143; raw <= 254; ++raw) EXPECT_TRUE(has(raw, SpecDeviation::kSaturated)) << raw;
  EXPECT_EQ(deviations[255], 1u << int(SpecDeviation::kNaNDropped));
}

TEST(AuditFixture, GptOssAndCleanCheckpoints) {
  const AuditResult gptoss = Audit({kFixtures + "/gptoss.safetensors"});
  EXPECT_TRUE(gptoss.errors.empty());
  EXPECT_EQ(ExitStatus(gptoss), 1);
  ASSERT_EQ(gptoss.plan.layers.size(), 4u);
  const KernelLayer* w13 = FindLayer(gptoss, "model.layers.1.mlp.experts.W13");
  ASSERT_NE(w13, nullptr) << Missing(gptoss, "kernel layer", "model.layers.1.mlp.experts.W13");
  EXPECT_EQ(std::tuple(w13->groups, w13->n, w13->k), std::tuple(4, 128, 256));
  EXPECT_TRUE(JudgeLayer(gptoss, *w13).admitted);
  const KernelLayer* w2 = FindLayer(gptoss, "model.layers.1.mlp.experts.W2");
  ASSERT_NE(w2, nullptr) << Missing(gptoss, "kernel layer", "model.layers.1.mlp.experts.W2");
  EXPECT_FALSE(JudgeLayer(gptoss, *w2).admitted);

  const AuditResult clean = Audit({kFixtures + "/clean"});
  EXPECT_TRUE(clean.errors.empty());
  EXPECT_EQ(ExitStatus(clean), 0);
  ASSERT_EQ(clean.plan.scales.size(), 6u);  // U8 `.scale` tensors, selected by their names
  ASSERT_EQ(clean.plan.layers.size(), 2u);
  EXPECT_EQ(clean.plan.layers[0].name, "layers.0.ffn.experts.W2");  // natural order: 2 before 13
  EXPECT_EQ(clean.plan.layers[1].name, "layers.0.ffn.experts.W13");
}

TEST(AuditFixture, IndexFileFolderAndShardsGiveTheSameReport) {
  const std::string by_folder = JsonReport(Audit({kFixtures + "/deepseek"}));
  const std::string by_index = JsonReport(Audit({kFixtures + "/deepseek/model.safetensors.index.json"}));
  json a = json::parse(by_folder), b = json::parse(by_index);
  a.erase("inputs");
  b.erase("inputs");
  EXPECT_EQ(a, b);
}

TEST(AuditFixture, ThreadsAndChunksChangeNothing) {
  const std::string one = JsonReport(Audit({kFixtures + "/deepseek"}, 1));
  EXPECT_EQ(JsonReport(Audit({kFixtures + "/deepseek"}, 2, 4096)), one);
  EXPECT_EQ(JsonReport(Audit({kFixtures + "/deepseek"}, 3, 1000)), one);  // chunk smaller than a tensor
}

TEST(AuditFixture, JsonVerdictsAreWhatPrepareAccepts) {
  const AuditResult result = Audit({kFixtures + "/deepseek"});
  const std::string report = JsonReport(result);
  const json parsed = json::parse(report);
  EXPECT_EQ(parsed["schema"], "mxdiff-audit/1");
  EXPECT_EQ(parsed["admission_rule"]["version"], AdmissionRuleVersion());
  EXPECT_EQ(parsed["exit_status"], 1);
  EXPECT_EQ(parsed["summary"]["refused_layers"], 3);
  absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  ASSERT_TRUE(verdicts.ok()) << verdicts.status();
  ASSERT_EQ(verdicts->size(), result.plan.layers.size());
  std::vector<std::string> files;
  for (const CheckpointFile& file : result.checkpoint.files) files.push_back(file.path);
  const MappedFiles source(files);
  for (size_t i = 0; i < verdicts->size(); ++i) {
    const KernelLayer& layer = result.plan.layers[i];
    const AuditedLayerVerdict& verdict = (*verdicts)[i];
    ASSERT_EQ(verdict.layer, layer.name);
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadLayerScaleBytes(result.checkpoint, result.plan, layer, source);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->size(), layer.scale_bytes);
    if (layer.groups == 0) {  // a structural refusal gives no shape the kernels could prepare
      EXPECT_FALSE(verdict.admitted) << layer.name;
      continue;
    }
    EXPECT_EQ(AdmitLayer(*bytes).admitted, verdict.admitted) << layer.name;
    EXPECT_TRUE(CheckAuditedVerdict(verdict, layer.groups, layer.n, layer.k, *bytes).ok()) << layer.name;
    // A verdict moved to another layer, or flipped, is refused.
    AuditedLayerVerdict flipped = verdict;
    flipped.admitted = !flipped.admitted;
    EXPECT_EQ(CheckAuditedVerdict(flipped, layer.groups, layer.n, layer.k, *bytes).code(),
              absl::StatusCode::kInvalidArgument);
    const AuditedLayerVerdict& other = (*verdicts)[(i + 4) % verdicts->size()];
    if (other.histogram != verdict.histogram) {
      EXPECT_FALSE(CheckAuditedVerdict(other, layer.groups, layer.n, layer.k, *bytes).ok()) << layer.name;
    }
  }
  absl::StatusOr<AuditedLayerVerdict> one = ReadLayerVerdict(report, "layers.1.ffn.experts.W13");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->admitted);
  EXPECT_EQ(ReadLayerVerdict(report, "no.such.layer").status().code(), absl::StatusCode::kNotFound);
}

TEST(AuditFixture, TextSummaryNamesTheRefusedLayersAndTheRule) {
  const std::string text = TextReport(Audit({kFixtures + "/deepseek"}));
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("kernel layers: 5 admitted, 3 refused"), std::string::npos);
  EXPECT_NE(text.find("refused layers.1.ffn.experts.W13 (5 groups x N 128 x K 256)"), std::string::npos);
  EXPECT_NE(text.find("raw 112 at layers.1.ffn.experts.2.w3.scale[5, 3]"), std::string::npos);
  EXPECT_NE(text.find("raw 255 at layers.2.ffn.experts.0.w2.scale[100, 1]"), std::string::npos);
  EXPECT_NE(text.find("layers.3.ffn.experts.1.w2.scale: scale shape [256, 3] disagrees"), std::string::npos);
  EXPECT_NE(text.find("flushed-to-zero 1 byte (raw 112); nan-dropped 1 byte (raw 255)"), std::string::npos);
  EXPECT_NE(text.find(AdmissionRuleVersion()), std::string::npos);
  EXPECT_NE(text.find("verdict: 3 of 8 kernel layers refused"), std::string::npos);
}

}  // namespace
}  // namespace mxdiff::checkpoint
