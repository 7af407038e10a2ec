// Checkpoints with DeepSeek V4's names, shapes and shard layout, written by
// write_v4_checkpoint.py (ctest fixture v4_checkpoints, small sizes: 2 layers x 8 experts,
// hidden 256, intermediate 128) clean and with one defect each: `mxdiff audit`'s verdicts, and
// what checkpoint/expert_weights.h loads or refuses, on each.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include "checkpoint/expert_weights.h"
#include "fmt/core.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/audit/audit_cli_runner.h"

namespace mxdiff::checkpoint {
namespace {

constexpr int kExperts = 8, kHidden = 256, kInter = 128;

std::string Dir(const std::string& variant) { return std::string(MXDIFF_V4_CHECKPOINTS) + "/" + variant; }

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream stream(path);
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()));
}

// The planted defect of a variant (defects.json).
nlohmann::json Defect(const std::string& variant) {
  const nlohmann::json manifest = ReadJson(Dir(variant) + "/defects.json");
  EXPECT_EQ(manifest["defects"].size(), 1u) << variant;
  return manifest["defects"].at(0);
}

struct Audit {
  int status = -1;
  nlohmann::json report;
  std::string err;
  // layer name -> "admitted" / "refused"
  std::map<std::string, std::string> verdicts() const {
    std::map<std::string, std::string> v;
    for (const auto& layer : report["layers"]) v[layer["name"]] = layer["verdict"];
    return v;
  }
  const nlohmann::json& layer(const std::string& name) const {
    for (const auto& l : report["layers"]) {
      if (l["name"] == name) return l;
    }
    static const nlohmann::json none;
    ADD_FAILURE() << "no layer " << name;
    return none;
  }
};

Audit RunAudit(const std::string& variant) {
  const checkpoint::testing::CliRun run = checkpoint::testing::RunAuditCli("--format=json " + Dir(variant));
  Audit a{run.status, nlohmann::json::parse(run.out, nullptr, false), run.err};
  EXPECT_FALSE(a.report.is_discarded()) << run.out << run.err;
  return a;
}

// Every kernel layer of the two layers admitted except `refused` (an MXFP4 shared expert is the
// routed layers' last group, an FP8 one no kernel layer: either way two a layer).
std::map<std::string, std::string> Expected(const std::vector<std::string>& refused) {
  std::map<std::string, std::string> v;
  for (int i = 0; i < 2; ++i) {
    for (const char* kind : {"experts.W13", "experts.W2"}) {
      v[fmt::format("layers.{}.ffn.{}", i, kind)] = "admitted";
    }
  }
  for (const std::string& name : refused) v[name] = "refused";
  return v;
}

TEST(V4Checkpoint, CleanIsAdmittedAndLoadsForEveryRank) {
  const Audit audit = RunAudit("clean");
  EXPECT_EQ(audit.status, 0) << audit.err;
  EXPECT_EQ(audit.verdicts(), Expected({}));
  // The audit judges the groups the loader gives the MoE layer: the routed experts and the shared one.
  for (const nlohmann::json& layer : audit.report["layers"]) EXPECT_EQ(layer["groups"], kExperts + 1) << layer["name"];
  for (const char* layer : {"layers.0", "layers.1"}) {
    for (int tp : {1, 2, 4}) {
      for (int rank = 0; rank < tp; ++rank) {
        absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({Dir("clean")}, layer, {tp, rank});
        ASSERT_TRUE(w.ok()) << w.status();
        EXPECT_EQ(w->experts, kExperts);
        EXPECT_TRUE(w->shared_expert);
        EXPECT_EQ(w->intermediate, kInter / tp);
        EXPECT_EQ(w->w13_scales.size(), size_t(kExperts + 1) * 2 * (kInter / tp) * kHidden / 32);
        const auto [lo, hi] = std::minmax_element(w->w13_scales.begin(), w->w13_scales.end());
        EXPECT_GE(*lo, 114);  // the generator's span
        EXPECT_LE(*hi, 126);
      }
    }
  }
}

TEST(V4Checkpoint, Fp8SharedExpertIsNoKernelLayerAndIsNotLoaded) {
  const Audit audit = RunAudit("fp8_shared");
  EXPECT_EQ(audit.status, 0) << audit.err;
  EXPECT_EQ(audit.verdicts(), Expected({}));
  absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({Dir("fp8_shared")}, "layers.1", {2, 1});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->shared_expert);
  EXPECT_NE(w->shared_note.find("F8_E4M3"), std::string::npos) << w->shared_note;
}

// A planted byte: the audit refuses its layer and locates it; the loader loads it (admission is
// the kernels' decision) at its place in the slice of the rank that owns it, and only there.
TEST(V4Checkpoint, Raw112InW3IsRefusedByTheAuditAndLoadedWhereItBelongs) {
  const nlohmann::json defect = Defect("raw112");
  ASSERT_EQ(defect["tensor"], "layers.1.ffn.experts.3.w3.scale");
  const Audit audit = RunAudit("raw112");
  EXPECT_EQ(audit.status, 1) << audit.err;
  EXPECT_EQ(audit.verdicts(), Expected({"layers.1.ffn.experts.W13"}));
  const nlohmann::json& refused = audit.layer("layers.1.ffn.experts.W13")["first_refused"];
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0]["tensor"], defect["tensor"]);
  EXPECT_EQ(refused[0]["raw"], 112);
  EXPECT_EQ(refused[0]["position"], nlohmann::json::array({defect["row"], defect["column"]}));
  const int row = defect["row"], column = defect["column"];
  for (int tp : {1, 2, 4}) {
    const int inter = kInter / tp;
    for (int rank = 0; rank < tp; ++rank) {
      absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({Dir("raw112")}, "layers.1", {tp, rank});
      ASSERT_TRUE(w.ok()) << w.status();
      const auto count = std::count(w->w13_scales.begin(), w->w13_scales.end(), 112);
      if (rank != row / inter) {
        EXPECT_EQ(count, 0) << "tp " << tp << " rank " << rank;
        continue;
      }
      EXPECT_EQ(count, 1);
      const size_t n = size_t(3) * 2 * inter + inter + row % inter;  // expert 3's up half
      EXPECT_EQ(w->w13_scales[n * (kHidden / 32) + column], 112) << "tp " << tp << " rank " << rank;
    }
  }
}

TEST(V4Checkpoint, NanInW2IsRefusedByTheAuditAndLoadedWhereItBelongs) {
  const nlohmann::json defect = Defect("nan");
  ASSERT_EQ(defect["tensor"], "layers.0.ffn.experts.5.w2.scale");
  const Audit audit = RunAudit("nan");
  EXPECT_EQ(audit.status, 1) << audit.err;
  EXPECT_EQ(audit.verdicts(), Expected({"layers.0.ffn.experts.W2"}));
  const nlohmann::json& refused = audit.layer("layers.0.ffn.experts.W2")["first_refused"];
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0]["raw"], 255);
  EXPECT_EQ(refused[0]["position"], nlohmann::json::array({defect["row"], defect["column"]}));
  const int row = defect["row"], column = defect["column"];
  for (int tp : {1, 2, 4}) {
    const int blocks = kInter / tp / 32;  // W2's K blocks per rank
    for (int rank = 0; rank < tp; ++rank) {
      absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({Dir("nan")}, "layers.0", {tp, rank});
      ASSERT_TRUE(w.ok()) << w.status();
      const auto count = std::count(w->w2_scales.begin(), w->w2_scales.end(), 0xFF);
      if (rank != column / blocks) {
        EXPECT_EQ(count, 0) << "tp " << tp << " rank " << rank;
        continue;
      }
      EXPECT_EQ(count, 1);
      EXPECT_EQ(w->w2_scales[(size_t(5) * kHidden + row) * blocks + column % blocks], 0xFF);
    }
  }
}

// A structural defect: the audit refuses the layer with a problem naming the tensor, the loader
// refuses with an error naming it; the other layer loads.
void ExpectStructuralDefect(const std::string& variant, const std::string& layer,
                            const std::vector<std::string>& refused, const std::string& message) {
  const nlohmann::json defect = Defect(variant);
  const std::string tensor = defect["tensor"];
  const Audit audit = RunAudit(variant);
  EXPECT_EQ(audit.status, 1) << audit.err;
  EXPECT_EQ(audit.verdicts(), Expected(refused));
  // The audit names a tensor of the expert (for a missing w3, its w1 without a partner).
  const std::string expert = tensor.substr(0, tensor.rfind('.', tensor.rfind('.') - 1) + 1);
  EXPECT_NE(audit.layer(refused.front())["problems"].dump().find(expert), std::string::npos)
      << audit.layer(refused.front())["problems"].dump();
  absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({Dir(variant)}, layer, {2, 0});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(fmt::format("\"{}\"", tensor)), std::string::npos) << w.status();
  EXPECT_NE(w.status().message().find(message), std::string::npos) << w.status();
  const std::string other = layer == "layers.0" ? "layers.1" : "layers.0";
  EXPECT_TRUE(LoadMoeLayerWeights({Dir(variant)}, other, {2, 0}).ok());
}

TEST(V4Checkpoint, MissingW3) {
  ExpectStructuralDefect("missing_w3", "layers.1", {"layers.1.ffn.experts.W13"}, "is missing");
}

TEST(V4Checkpoint, ScaleShapeMismatch) {
  ExpectStructuralDefect("scale_shape", "layers.0", {"layers.0.ffn.experts.W13"}, "does not match its weight");
}

TEST(V4Checkpoint, ExpertShapeMismatch) {
  ExpectStructuralDefect("expert_shape", "layers.1", {"layers.1.ffn.experts.W13", "layers.1.ffn.experts.W2"},
                         "holds 64 rows");
}

TEST(V4Checkpoint, LayerNotInTheCheckpoint) {
  absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({Dir("clean")}, "layers.2", {1, 0});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("layers.0, layers.1"), std::string::npos) << w.status();
}

}  // namespace
}  // namespace mxdiff::checkpoint
