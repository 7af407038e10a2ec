// Selection of scale tensors, the weight shape check and the grouping into kernel layers, on
// checkpoints built in memory.
#include "gtest/gtest.h"
#include "tests/checkpoint/safetensors_builder.h"
#include "checkpoint/scale_plan.h"

namespace mxdiff::checkpoint {
namespace {

using testing::BuildFile;
using testing::TestTensor;

struct Memory {
  std::vector<std::vector<uint8_t>> files;
  Checkpoint checkpoint;
};

Memory Load(std::vector<std::vector<TestTensor>> files) {
  Memory memory;
  for (size_t f = 0; f < files.size(); ++f) {
    memory.files.push_back(BuildFile(files[f]));
    const std::string name = "file" + std::to_string(f) + ".safetensors";
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsBuffer(name, memory.files.back());
    EXPECT_TRUE(header.ok()) << header.status();
    if (header.ok()) AddCheckpointFile(memory.checkpoint, name, *std::move(header));
  }
  return memory;
}

// DeepSeek V4 expert tensors: w1/w3 [n, k/2] codes with [n, k/32] scales, w2 transposed.
std::vector<TestTensor> Expert(const std::string& prefix, int n, int k, const std::string& weight_dtype = "I8",
                               const std::string& scale_dtype = "F8_E8M0") {
  std::vector<TestTensor> tensors;
  for (const auto& [w, rows, cols] : {std::tuple{"w1", n, k}, std::tuple{"w2", k, n}, std::tuple{"w3", n, k}}) {
    tensors.push_back({prefix + "." + w + ".weight", weight_dtype,
                       {uint64_t(rows), uint64_t(weight_dtype == "F4" ? cols : cols / 2)}});
    tensors.push_back({prefix + "." + w + ".scale", scale_dtype, {uint64_t(rows), uint64_t(cols / 32)}});
  }
  return tensors;
}

const KernelLayer* FindLayer(const AuditPlan& plan, const std::string& name) {
  for (const KernelLayer& layer : plan.layers) {
    if (layer.name == name) return &layer;
  }
  return nullptr;
}

std::vector<std::string> MemberNames(const AuditPlan& plan, const KernelLayer& layer) {
  std::vector<std::string> names;
  for (size_t s : layer.members) names.push_back(plan.scales[s].name);
  return names;
}

TEST(NaturalLess, DigitRunsCompareAsNumbers) {
  EXPECT_TRUE(NaturalLess("layers.2.x", "layers.10.x"));
  EXPECT_FALSE(NaturalLess("layers.10.x", "layers.2.x"));
  EXPECT_TRUE(NaturalLess("a", "b"));
  EXPECT_TRUE(NaturalLess("a", "a.b"));
  EXPECT_FALSE(NaturalLess("a", "a"));
  EXPECT_TRUE(NaturalLess("x1", "x01"));  // equal numbers: the shorter spelling first (a total order)
  EXPECT_FALSE(NaturalLess("x01", "x1"));
}

TEST(ShapeMismatch, PackedCodesBesideTheirScales) {
  auto tensor = [](std::string dtype, std::vector<uint64_t> shape) {
    TensorInfo info;
    info.name = "t";
    info.dtype = *ParseDtype(dtype);
    info.shape = std::move(shape);
    return info;
  };
  const TensorInfo scale = tensor("F8_E8M0", {64, 8});
  EXPECT_EQ(ShapeMismatch(scale, tensor("I8", {64, 128})), "");         // DeepSeek: K/2 code bytes
  EXPECT_EQ(ShapeMismatch(scale, tensor("U8", {64, 128})), "");
  EXPECT_EQ(ShapeMismatch(scale, tensor("F4", {64, 256})), "");         // one element per code
  EXPECT_EQ(ShapeMismatch(scale, tensor("U8", {64, 8, 16})), "");       // gpt-oss blocks
  EXPECT_NE(ShapeMismatch(scale, tensor("I8", {64, 127})), "");
  EXPECT_NE(ShapeMismatch(scale, tensor("I8", {63, 128})), "");
  EXPECT_NE(ShapeMismatch(scale, tensor("U8", {64, 8, 15})), "");
  EXPECT_NE(ShapeMismatch(scale, tensor("I8", {128})), "");
  EXPECT_NE(ShapeMismatch(tensor("F8_E8M0", {64, 3}), tensor("I8", {64, 32})).find("64 codes a row need 2 scale bytes"),
            std::string::npos)
      << ShapeMismatch(tensor("F8_E8M0", {64, 3}), tensor("I8", {64, 32}));
}

TEST(PlanAudit, DeepSeekExpertsFormW13AndW2InKernelOrder) {
  std::vector<TestTensor> tensors;
  for (int e : {10, 2, 0}) {  // out of order, and 10 after 2 numerically
    for (TestTensor& t : Expert("layers.1.ffn.experts." + std::to_string(e), 64, 256)) tensors.push_back(t);
  }
  for (TestTensor& t : Expert("layers.1.ffn.shared_experts", 64, 256)) tensors.push_back(t);
  Memory memory = Load({tensors});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The shared expert is the last group of the routed W13 and W2, as the MoE layer runs it.
  ASSERT_EQ(plan->layers.size(), 2u);
  EXPECT_EQ(plan->scales.size(), 12u);
  const KernelLayer* w13 = FindLayer(*plan, "layers.1.ffn.experts.W13");
  ASSERT_NE(w13, nullptr);
  EXPECT_EQ(w13->kind, LayerKind::kRoutedW13);
  EXPECT_TRUE(w13->problems.empty());
  EXPECT_EQ(MemberNames(*plan, *w13),
            (std::vector<std::string>{"layers.1.ffn.experts.0.w1.scale", "layers.1.ffn.experts.0.w3.scale",
                                      "layers.1.ffn.experts.2.w1.scale", "layers.1.ffn.experts.2.w3.scale",
                                      "layers.1.ffn.experts.10.w1.scale", "layers.1.ffn.experts.10.w3.scale",
                                      "layers.1.ffn.shared_experts.w1.scale", "layers.1.ffn.shared_experts.w3.scale"}));
  EXPECT_EQ(w13->groups, 4);
  EXPECT_EQ(w13->n, 128);  // gate rows then up rows
  EXPECT_EQ(w13->k, 256);
  EXPECT_EQ(w13->scale_bytes, 8u * 64 * 8);
  for (size_t i = 0; i < w13->members.size(); ++i) {
    EXPECT_EQ(plan->scales[w13->members[i]].layer_offset, i * 64 * 8);
  }
  const KernelLayer* w2 = FindLayer(*plan, "layers.1.ffn.experts.W2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(std::tuple(w2->groups, w2->n, w2->k), std::tuple(4, 256, 64));
  EXPECT_EQ(MemberNames(*plan, *w2).back(), "layers.1.ffn.shared_experts.w2.scale");
  EXPECT_EQ(FindLayer(*plan, "layers.1.ffn.shared_experts.W13"), nullptr);
  EXPECT_EQ(FindLayer(*plan, "layers.1.ffn.shared_experts.W2"), nullptr);
}

TEST(PlanAudit, ASharedExpertOfAnotherShapeRefusesTheRoutedLayer) {
  // The loader refuses such a layer (the shared expert must have the routed experts' shape).
  std::vector<TestTensor> tensors = Expert("layers.0.ffn.experts.0", 64, 256);
  for (TestTensor& t : Expert("layers.0.ffn.shared_experts", 128, 256)) tensors.push_back(t);
  Memory memory = Load({tensors});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const KernelLayer* w13 = FindLayer(*plan, "layers.0.ffn.experts.W13");
  ASSERT_NE(w13, nullptr);
  ASSERT_FALSE(w13->problems.empty());
  EXPECT_EQ(w13->problems[0].tensor, "layers.0.ffn.shared_experts.w1.scale");
  EXPECT_NE(w13->problems[0].message.find("disagrees with"), std::string::npos) << w13->problems[0].message;
}

TEST(PlanAudit, AnFp8SharedExpertOrOneWithoutRoutedExpertsStaysApart) {
  // V4-Flash: an FP8 shared expert beside MXFP4 routed experts is no kernel layer, and the routed
  // layers stay as they are (the loader leaves it out).
  std::vector<TestTensor> tensors = Expert("layers.0.ffn.experts.0", 64, 256);
  for (TestTensor& t : Expert("layers.0.ffn.shared_experts", 64, 256, "F8_E4M3")) tensors.push_back(t);
  Memory memory = Load({tensors});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layers.size(), 2u);
  const KernelLayer* w13 = FindLayer(*plan, "layers.0.ffn.experts.W13");
  ASSERT_NE(w13, nullptr);
  EXPECT_TRUE(w13->problems.empty());
  EXPECT_EQ(w13->groups, 1);
  // A selection of the shared expert alone keeps it a layer of its own.
  std::vector<TestTensor> mxfp4 = Expert("layers.0.ffn.experts.0", 64, 256);
  for (TestTensor& t : Expert("layers.0.ffn.shared_experts", 64, 256)) mxfp4.push_back(t);
  Memory both = Load({mxfp4});
  absl::StatusOr<AuditPlan> shared_only = PlanAudit(both.checkpoint, {.pattern = ".*shared_experts.*scale"});
  ASSERT_TRUE(shared_only.ok()) << shared_only.status();
  const KernelLayer* shared13 = FindLayer(*shared_only, "layers.0.ffn.shared_experts.W13");
  ASSERT_NE(shared13, nullptr);
  EXPECT_EQ(shared13->kind, LayerKind::kSharedW13);
  EXPECT_EQ(std::tuple(shared13->groups, shared13->n, shared13->k), std::tuple(1, 128, 256));
}

TEST(PlanAudit, StructuralProblemsRefuseTheLayerAndAreNamed) {
  std::vector<TestTensor> tensors = Expert("layers.0.ffn.experts.0", 64, 256);
  for (TestTensor& t : Expert("layers.0.ffn.experts.1", 32, 256)) tensors.push_back(t);  // other N
  std::vector<TestTensor> lone = Expert("layers.0.ffn.experts.2", 64, 256);
  for (TestTensor& t : lone) {
    if (t.name.find(".w3.") == std::string::npos) tensors.push_back(t);  // expert 2 lacks w3
  }
  tensors.push_back({"layers.0.ffn.experts.3.w2.weight", "I8", {256, 32}});
  tensors.push_back({"layers.0.ffn.experts.3.w2.scale", "F8_E8M0", {256, 3}});  // K disagrees
  tensors.push_back({"layers.0.ffn.experts.4.w2.scale", "F8_E8M0", {256, 2}});  // no weight
  Memory memory = Load({tensors});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const KernelLayer* w13 = FindLayer(*plan, "layers.0.ffn.experts.W13");
  ASSERT_NE(w13, nullptr);
  auto has_problem = [](const KernelLayer& layer, const std::string& tensor, const std::string& text) {
    for (const LayerProblem& problem : layer.problems) {
      if (problem.tensor == tensor && problem.message.find(text) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_problem(*w13, "layers.0.ffn.experts.2.w1.scale", "no w3 partner"));
  EXPECT_TRUE(has_problem(*w13, "layers.0.ffn.experts.1.w1.scale", "disagrees with layers.0.ffn.experts.0.w1.scale"));
  EXPECT_EQ(w13->groups, 0);  // no shape for a refused structure
  const KernelLayer* w2 = FindLayer(*plan, "layers.0.ffn.experts.W2");
  ASSERT_NE(w2, nullptr);
  EXPECT_TRUE(has_problem(*w2, "layers.0.ffn.experts.3.w2.scale", "scale shape [256, 3] disagrees with weight"));
  EXPECT_TRUE(has_problem(*w2, "layers.0.ffn.experts.4.w2.scale", "no weight tensor"));
}

TEST(PlanAudit, Fp8WeightsAndLoneScalesAreInNoKernelLayer) {
  std::vector<TestTensor> tensors = Expert("layers.0.ffn.shared_experts", 64, 256, "F8_E4M3");
  tensors.push_back({"layers.0.attn.wq.weight", "F8_E4M3", {128, 256}});
  tensors.push_back({"layers.0.attn.wq.scale", "F8_E8M0", {1, 2}});
  tensors.push_back({"lonely_e8m0", "F8_E8M0", {4}});
  tensors.push_back({"layers.0.u8.scale", "U8", {4}});  // U8 without a weight: not a scale by naming
  Memory memory = Load({tensors});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->layers.empty());
  ASSERT_EQ(plan->scales.size(), 5u);  // the shared expert's three, the attention's, the lone one
  for (const ScaleTensor& scale : plan->scales) {
    EXPECT_EQ(scale.layer, -1) << scale.name;
    EXPECT_NE(scale.note.find("not a kernel layer"), std::string::npos) << scale.name << ": " << scale.note;
  }
  EXPECT_NE(plan->scales[0].note.find("F8_E4M3"), std::string::npos) << plan->scales[0].note;
}

TEST(PlanAudit, GptOssFusedExpertsAndU8ScalesByName) {
  Memory memory = Load({{
      {"model.layers.0.mlp.experts.gate_up_proj_blocks", "U8", {4, 128, 8, 16}},
      {"model.layers.0.mlp.experts.gate_up_proj_scales", "U8", {4, 128, 8}},
      {"model.layers.0.mlp.experts.down_proj_blocks", "U8", {4, 256, 2, 16}},
      {"model.layers.0.mlp.experts.down_proj_scales", "U8", {4, 256, 2}},
      {"model.layers.0.mlp.router.weight", "F16", {4, 256}},
  }});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layers.size(), 2u);
  const KernelLayer* w13 = FindLayer(*plan, "model.layers.0.mlp.experts.W13");
  ASSERT_NE(w13, nullptr);
  EXPECT_EQ(w13->kind, LayerKind::kFusedW13);
  EXPECT_EQ(std::tuple(w13->groups, w13->n, w13->k), std::tuple(4, 128, 256));
  const KernelLayer* w2 = FindLayer(*plan, "model.layers.0.mlp.experts.W2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(std::tuple(w2->groups, w2->n, w2->k), std::tuple(4, 256, 64));
}

TEST(PlanAudit, PatternReplacesTheSelection) {
  std::vector<TestTensor> tensors = Expert("layers.0.ffn.experts.0", 64, 256);
  tensors.push_back({"layers.0.norm", "F32", {4}});
  Memory memory = Load({tensors});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {.pattern = ".*\\.w2\\.scale"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->scales.size(), 1u);
  EXPECT_EQ(plan->scales[0].name, "layers.0.ffn.experts.0.w2.scale");
  ASSERT_EQ(plan->layers.size(), 1u);
  EXPECT_EQ(plan->layers[0].name, "layers.0.ffn.experts.W2");

  plan = PlanAudit(memory.checkpoint, {.pattern = "layers\\.0\\.norm"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->errors.size(), 1u);
  EXPECT_EQ(plan->errors[0].tensor, "layers.0.norm");
  EXPECT_NE(plan->errors[0].message.find("dtype F32 is not one byte"), std::string::npos) << plan->errors[0].message;

  plan = PlanAudit(memory.checkpoint, {.pattern = "(unclosed"});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--pattern"), absl::string_view::npos) << plan.status();
}

TEST(PlanAudit, ScaleAndWeightInDifferentFilesAndLeadingZeroNames) {
  std::vector<TestTensor> weights, scales;
  for (TestTensor& t : Expert("layers.5.ffn.experts.0", 64, 256)) {
    (t.name.ends_with(".weight") ? weights : scales).push_back(t);
  }
  scales.push_back({"layers.5.ffn.experts.01.w2.scale", "F8_E8M0", {256, 2}});  // not expert 1: no convention
  weights.push_back({"layers.5.ffn.experts.01.w2.weight", "I8", {256, 32}});
  Memory memory = Load({weights, scales});
  absl::StatusOr<AuditPlan> plan = PlanAudit(memory.checkpoint, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const KernelLayer* w13 = FindLayer(*plan, "layers.5.ffn.experts.W13");
  ASSERT_NE(w13, nullptr);
  EXPECT_TRUE(w13->problems.empty());
  const KernelLayer* lone = FindLayer(*plan, "layers.5.ffn.experts.01.w2");
  ASSERT_NE(lone, nullptr);
  EXPECT_EQ(lone->kind, LayerKind::kSingle);
  EXPECT_EQ(std::tuple(lone->groups, lone->n, lone->k), std::tuple(1, 256, 64));
}

}  // namespace
}  // namespace mxdiff::checkpoint
