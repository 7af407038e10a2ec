// `mxdiff audit` on the checkpoints of issue 23's items 11-15, as users run it: a checkpoint
// with no kernel layer the audit knows, --keep-going with a tensor in two shards, with an
// unreadable shard and with bad indexes, a *.safetensors beside an index that it does not
// name, and the report after an error without --keep-going.
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/audit/audit_cli_runner.h"
#include "tests/checkpoint/safetensors_builder.h"

namespace mxdiff::checkpoint {
namespace {

using nlohmann::json;
using testing::BuildFile;
using testing::CliRun;
using testing::RunAuditCli;
using testing::TempDir;

bool Has(const std::string& text, const std::string& phrase) { return text.find(phrase) != std::string::npos; }

json JsonOf(const CliRun& run) {
  json report = json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(report.is_object()) << "stdout is no JSON report:\n" << run.out << "\nstderr:\n" << run.err;
  return report.is_object() ? report : json::object();
}

// Issue 23, item 11: names the audit does not know, or no scales at all, were "every kernel
// layer admitted" (exit 0). No recognised layer is an error that says what was there.
TEST(AuditCliNoKernelLayer, UnknownNamesOrNoScalesAreAnErrorNotAPass) {
  TempDir dir;
  const std::string unknown = dir.Write(
      "unknown/model.safetensors",
      BuildFile({{"layers.0.mlp.down_proj.weight", "U8", {64, 16}}, {"layers.0.mlp.down_proj.weight_scale", "U8", {64, 1}},
                 {"layers.0.mlp.up_proj.weight", "U8", {64, 16}}, {"layers.0.mlp.up_proj.weight_scale", "U8", {64, 1}},
                 {"layers.0.norm.bias", "BF16", {64}}}));
  const std::string no_scales =
      dir.Write("bf16/model.safetensors", BuildFile({{"layers.0.mlp.down_proj.weight", "BF16", {64, 32}},
                                                     {"layers.0.norm.weight", "F32", {64}}}));
  const std::string fp8 = dir.Write("fp8/model.safetensors", BuildFile({{"layers.0.attn.wq.weight", "F8_E4M3", {128, 128}},
                                                                       {"layers.0.attn.wq.scale", "F8_E8M0", {1, 1}}}));
  for (const std::string& file : {unknown, no_scales, fp8}) {
    const CliRun text = RunAuditCli(file);
    EXPECT_EQ(text.status, 2) << file << "\n" << text.out << text.err;
    EXPECT_FALSE(Has(text.out, "every kernel layer admitted")) << text.out;
    EXPECT_TRUE(Has(text.out, "verdict: no MXFP4 kernel layer found")) << text.out;
    EXPECT_TRUE(Has(text.err, "mxdiff audit: no MXFP4 kernel layer found in 1 file")) << text.err;

    const CliRun machine = RunAuditCli("--format=json " + file);
    EXPECT_EQ(machine.status, 2);
    const json report = JsonOf(machine);
    EXPECT_EQ(report["exit_status"], 2);
    ASSERT_TRUE(report["no_kernel_layer"].is_object()) << machine.out;
    EXPECT_TRUE(Has(report["no_kernel_layer"]["message"].get<std::string>(), "no MXFP4 kernel layer found"));
  }
  // What was seen is named: counts by dtype and by name ending.
  const json unknown_report = JsonOf(RunAuditCli("--format=json " + unknown));
  const json& seen = unknown_report["no_kernel_layer"];
  EXPECT_EQ(seen["tensors"], 5);
  EXPECT_EQ(seen["dtypes"], json({{"U8", 4}, {"BF16", 1}}));
  EXPECT_EQ(seen["name_endings"], json({{".weight", 2}, {".weight_scale", 2}, {".bias", 1}}));
  EXPECT_EQ(seen["scale_tensors"], 0);
  const CliRun unknown_text = RunAuditCli(unknown);
  EXPECT_TRUE(Has(unknown_text.err, "5 tensors (dtypes U8 4, BF16 1; names ending \".weight\" 2, \".weight_scale\" 2"))
      << unknown_text.err;
  // Scales that are there but belong to no MXFP4 weight say why.
  const CliRun fp8_text = RunAuditCli(fp8);
  EXPECT_TRUE(Has(fp8_text.err, "1 scale tensor selected, in no kernel layer (weight is F8_E4M3")) << fp8_text.err;
  // --pattern that selects nothing says so.
  const CliRun pattern = RunAuditCli("--pattern='nothing' " + unknown);
  EXPECT_EQ(pattern.status, 2);
  EXPECT_TRUE(Has(pattern.err, "no tensor matches --pattern \"nothing\"")) << pattern.err;
  // A checkpoint with kernel layers says nothing of the kind.
  EXPECT_TRUE(JsonOf(RunAuditCli("--format=json " + std::string(MXDIFF_AUDIT_FIXTURES) + "/clean"))["no_kernel_layer"].is_null());
}

const json* LayerNamed(const json& report, const std::string& name) {
  for (const json& layer : report["layers"]) {
    if (layer["name"] == name) return &layer;
  }
  return nullptr;
}

// Issue 23, item 12: with --keep-going, a tensor in two shards was judged by the copy read
// first: "admitted", problems [], in the order 1, 2, 3 though shard 3's copy holds 0xFF.
TEST(AuditCliKeepGoing, ATensorInTwoShardsIsRefusedInEveryOrder) {
  TempDir dir;
  const std::string base = "layers.1.ffn.experts.0.w2";
  const std::string one = dir.Write("1.safetensors", BuildFile({{base + ".weight", "I8", {64, 16}},
                                                                {base + ".scale", "F8_E8M0", {64, 1}}}));
  const std::string two = dir.Write("2.safetensors", BuildFile({{"layers.0.ffn.experts.0.w2.weight", "I8", {64, 16}},
                                                                {"layers.0.ffn.experts.0.w2.scale", "F8_E8M0", {64, 1}}}));
  const std::string three = dir.Write("3.safetensors", BuildFile({{base + ".scale", "F8_E8M0", {64, 1}, 0xFF}}));
  for (const std::string& files : {one + " " + two + " " + three, three + " " + two + " " + one}) {
    const CliRun run = RunAuditCli("--format=json --keep-going " + files);
    EXPECT_EQ(run.status, 2) << files;
    const json report = JsonOf(run);
    const json* layer = LayerNamed(report, "layers.1.ffn.experts.W2");
    ASSERT_NE(layer, nullptr) << run.out;
    EXPECT_EQ((*layer)["verdict"], "refused") << files;
    ASSERT_FALSE((*layer)["problems"].empty()) << files;
    const std::string problem = (*layer)["problems"][0]["message"];
    EXPECT_TRUE(Has(problem, one) && Has(problem, three)) << problem;
    ASSERT_FALSE((*layer)["first_refused"].empty());
    EXPECT_EQ((*layer)["first_refused"][0]["file"], three);
    EXPECT_EQ((*layer)["first_refused"][0]["raw"], 255);
    const CliRun text = RunAuditCli("--keep-going " + files);
    EXPECT_TRUE(Has(text.out, "refused layers.1.ffn.experts.W2")) << text.out;
    EXPECT_TRUE(Has(text.out, "raw 255 at " + base + ".scale[0, 0] in " + three)) << text.out;
  }
}

// Issue 23, item 13: with --keep-going, an unreadable shard's layers vanished ("8 admitted, 0
// refused") although the index names their tensors.
TEST(AuditCliKeepGoing, AnUnreadableShardsLayersAreRefused) {
  TempDir dir;
  const std::string clean = "layers.0.ffn.experts.0.w2", lost = "layers.1.ffn.experts.0.w2";
  dir.Write("ckpt/a.safetensors",
            BuildFile({{clean + ".weight", "I8", {64, 16}}, {clean + ".scale", "F8_E8M0", {64, 1}}}));
  dir.Write("ckpt/b.safetensors", std::string("\x01\x02", 2));
  dir.Write("ckpt/model.safetensors.index.json",
            json({{"weight_map", {{clean + ".weight", "a.safetensors"}, {clean + ".scale", "a.safetensors"},
                                  {lost + ".weight", "b.safetensors"}, {lost + ".scale", "b.safetensors"}}}})
                .dump());
  const CliRun text = RunAuditCli("--keep-going " + dir.path() + "/ckpt");
  EXPECT_EQ(text.status, 2);
  EXPECT_TRUE(Has(text.out, "kernel layers: 1 admitted, 1 refused")) << text.out;
  EXPECT_TRUE(Has(text.out, "refused layers.1.ffn.experts.W2")) << text.out;
  const json report = JsonOf(RunAuditCli("--format=json --keep-going " + dir.path() + "/ckpt"));
  const json* layer = LayerNamed(report, "layers.1.ffn.experts.W2");
  ASSERT_NE(layer, nullptr) << report.dump();
  EXPECT_EQ((*layer)["verdict"], "refused");
  EXPECT_EQ((*layer)["unread_tensors"], json::array({lost + ".scale"}));
}

// Issue 23, item 15: a *.safetensors beside an index that it does not name was ignored without
// a word (it held 0xFF scales). It is named and audited on its own.
TEST(AuditCliUnindexed, AFileBesideTheIndexIsNamedAndAudited) {
  TempDir dir;
  const std::string clean = "layers.0.ffn.experts.0.w2";
  const std::vector<testing::TestTensor> indexed = {{clean + ".weight", "I8", {64, 16}},
                                                    {clean + ".scale", "F8_E8M0", {64, 1}}};
  dir.Write("ckpt/model-00001-of-00001.safetensors", BuildFile(indexed));
  const std::string index = dir.Write(
      "ckpt/model.safetensors.index.json",
      json({{"weight_map", {{clean + ".weight", "model-00001-of-00001.safetensors"},
                            {clean + ".scale", "model-00001-of-00001.safetensors"}}}})
          .dump());
  const std::string stray = dir.Write(
      "ckpt/extra.safetensors", BuildFile({{"layers.5.ffn.experts.0.w2.weight", "I8", {64, 16}},
                                           {"layers.5.ffn.experts.0.w2.scale", "F8_E8M0", {64, 1}, 0xFF}}));
  for (const std::string& path : {dir.path() + "/ckpt", index}) {
    const CliRun text = RunAuditCli(path);
    EXPECT_EQ(text.status, 1) << text.out << text.err;
    EXPECT_TRUE(Has(text.out, "not in the index " + index + ": " + stray +
                                  " (2 tensors, 0 also named by the index), audited on its own: 1 kernel layer, 1 "
                                  "refused (layers.5.ffn.experts.W2); 64 scale bytes outside 113..128"))
        << text.out;
    EXPECT_TRUE(Has(text.out, "verdict: every kernel layer of the index admitted, but 1 kernel layer refused in files "
                              "beside it"))
        << text.out;
    const json report = JsonOf(RunAuditCli("--format=json " + path));
    EXPECT_EQ(report["exit_status"], 1);
    ASSERT_EQ(report["unindexed_files"].size(), 1u) << report.dump();
    const json& entry = report["unindexed_files"][0];
    EXPECT_EQ(entry["file"], stray);
    EXPECT_EQ(entry["index"], index);
    EXPECT_EQ(entry["tensors"], 2);
    EXPECT_EQ(entry["also_in_index"], 0);
    EXPECT_EQ(entry["audited"], true);
    EXPECT_EQ(entry["refused_layers"], json::array({"layers.5.ffn.experts.W2"}));
    EXPECT_EQ(entry["refused_bytes"], 64);
  }
  // A copy of the indexed tensors beside the index (a consolidated file): named, its names do
  // not collide with the index's (it is audited apart), admitted.
  std::filesystem::remove(stray);
  const std::string copy = dir.Write("ckpt/consolidated.safetensors", BuildFile(indexed));
  const CliRun consolidated = RunAuditCli("--format=json " + dir.path() + "/ckpt");
  EXPECT_EQ(consolidated.status, 0) << consolidated.out << consolidated.err;
  const json copy_report = JsonOf(consolidated);
  ASSERT_EQ(copy_report["unindexed_files"].size(), 1u);
  EXPECT_EQ(copy_report["unindexed_files"][0]["file"], copy);
  EXPECT_EQ(copy_report["unindexed_files"][0]["also_in_index"], 2);
  // One whose header cannot be read is an error that names it.
  const std::string broken = dir.Write("ckpt/broken.safetensors", std::string("\x01", 1));
  const CliRun bad = RunAuditCli(dir.path() + "/ckpt");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(Has(bad.err, broken + ": truncated")) << bad.err;
  EXPECT_TRUE(Has(bad.err, "a file beside the index " + index + " that it does not name")) << bad.err;
}

// Issue 23, item 15: after an error without --keep-going the report read like a result ("1
// file, 0 scale tensors ... deviations: none"). It is marked partial and judges nothing.
TEST(AuditCliPartial, AReportAfterAnErrorWithoutKeepGoingIsMarkedPartial) {
  TempDir dir;
  const std::string bad = dir.Write("bad.safetensors", std::string("\x05\x00", 2));
  const std::string clean = std::string(MXDIFF_AUDIT_FIXTURES) + "/clean";
  const CliRun text = RunAuditCli(clean + " " + bad);
  EXPECT_EQ(text.status, 2);
  EXPECT_TRUE(Has(text.out, "partial report: stopped at the first error (1 error on stderr)")) << text.out;
  EXPECT_TRUE(Has(text.out, "verdict: none: no kernel layer was judged")) << text.out;
  for (const char* result_like : {"deviations", "kernel layers:", "scale tensor", "admitted,"}) {
    EXPECT_FALSE(Has(text.out, result_like)) << result_like << " in\n" << text.out;
  }
  const json report = JsonOf(RunAuditCli("--format=json " + clean + " " + bad));
  EXPECT_EQ(report["partial"], true);
  EXPECT_EQ(report["exit_status"], 2);
  EXPECT_EQ(report["layers"], json::array());  // the clean file's two layers were read, not judged
  EXPECT_EQ(report["tensors"], json::array());
  EXPECT_EQ(report["summary"]["files"], 1);
  // With --keep-going the report is whole (everything readable judged) and says so.
  const json kept = JsonOf(RunAuditCli("--format=json --keep-going " + clean + " " + bad));
  EXPECT_EQ(kept["partial"], false);
  EXPECT_EQ(kept["summary"]["layers"], 2);
  const CliRun kept_text = RunAuditCli("--keep-going " + clean + " " + bad);
  EXPECT_FALSE(Has(kept_text.out, "partial")) << kept_text.out;
  EXPECT_TRUE(Has(kept_text.out, "verdict: 1 error (on stderr): the audit is incomplete")) << kept_text.out;
}

}  // namespace
}  // namespace mxdiff::checkpoint
