// `mxdiff audit` as users run it: exit status 0 / 1 / 2, the JSON on stdout, errors on stderr,
// no progress bar when stderr is not a terminal, flags checked.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>
#include <vector>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/audit/audit_cli_runner.h"
#include "tests/checkpoint/safetensors_builder.h"

namespace mxdiff::checkpoint {
namespace {

const std::string kFixtures = MXDIFF_AUDIT_FIXTURES;

using testing::CliRun;

CliRun Mxdiff(const std::string& args) { return testing::RunAuditCli(args); }

TEST(AuditCli, ExitStatusZeroOneTwo) {
  const CliRun clean = Mxdiff(kFixtures + "/clean");
  EXPECT_EQ(clean.status, 0) << clean.out << clean.err;
  EXPECT_NE(clean.out.find("verdict: every kernel layer admitted"), std::string::npos) << clean.out;
  EXPECT_EQ(clean.err, "");  // no progress bar: stderr is a file here

  const CliRun refused = Mxdiff(kFixtures + "/deepseek");
  EXPECT_EQ(refused.status, 1) << refused.out << refused.err;
  EXPECT_NE(refused.out.find("3 of 8 kernel layers refused"), std::string::npos) << refused.out;

  const CliRun missing = Mxdiff(kFixtures + "/no-such-checkpoint");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("no-such-checkpoint: no such file or folder"), std::string::npos) << missing.err;
}

TEST(AuditCli, JsonOnStdout) {
  const CliRun run = Mxdiff("--format=json " + kFixtures + "/gptoss.safetensors");
  EXPECT_EQ(run.status, 1) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["schema"], "mxdiff-audit/1");
  EXPECT_EQ(report["exit_status"], 1);
  EXPECT_EQ(report["summary"]["layers"], 4);
  EXPECT_EQ(report["summary"]["refused_layers"], 1);
}

TEST(AuditCli, KeepGoingStillFails) {
  const testing::TempDir dir;
  const std::string bad = dir.Write("bad.safetensors", std::string("\x05\x00", 2));
  const CliRun stopped = Mxdiff("--format=json " + bad + " " + kFixtures + "/clean");
  EXPECT_EQ(stopped.status, 2);
  EXPECT_EQ(nlohmann::json::parse(stopped.out)["summary"]["layers"], 0);
  const CliRun kept = Mxdiff("--format=json --keep-going " + bad + " " + kFixtures + "/clean");
  EXPECT_EQ(kept.status, 2);
  const nlohmann::json report = nlohmann::json::parse(kept.out);
  EXPECT_EQ(report["summary"]["layers"], 2);
  EXPECT_EQ(report["summary"]["admitted_layers"], 2);
  ASSERT_EQ(report["errors"].size(), 1u);
  EXPECT_EQ(report["errors"][0]["file"], bad);
  EXPECT_NE(kept.err.find(bad + ": truncated"), std::string::npos) << kept.err;
}

// The MoE layer runs the shared expert as the last group of the routed W13 (kernels/moe_layer.h):
// a refused byte in it refuses the W13 the kernels prepare, never only a layer of its own.
TEST(AuditCli, ARefusedSharedExpertRefusesTheRoutedW13) {
  std::vector<testing::TestTensor> tensors;
  for (const std::string prefix : {"layers.0.ffn.experts.0", "layers.0.ffn.experts.1", "layers.0.ffn.shared_experts"}) {
    for (const auto& [w, rows, cols] : {std::tuple{"w1", 64, 256}, std::tuple{"w2", 256, 64}, std::tuple{"w3", 64, 256}}) {
      tensors.push_back({prefix + "." + w + ".weight", "I8", {uint64_t(rows), uint64_t(cols / 2)}});
      const bool planted = prefix.ends_with("shared_experts") && std::string_view(w) == "w3";
      tensors.push_back({prefix + "." + w + ".scale", "F8_E8M0", {uint64_t(rows), uint64_t(cols / 32)},
                         uint8_t(planted ? 112 : 120)});
    }
  }
  const testing::TempDir dir;
  const std::string file = dir.Write("model.safetensors", testing::BuildFile(tensors));
  const CliRun run = Mxdiff("--format=json " + file);
  EXPECT_EQ(run.status, 1) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  std::map<std::string, nlohmann::json> layers;
  for (const nlohmann::json& layer : report["layers"]) layers[layer["name"]] = layer;
  std::map<std::string, std::string> verdicts;
  for (const auto& [name, layer] : layers) verdicts[name] = layer["verdict"];
  EXPECT_EQ(verdicts, (std::map<std::string, std::string>{{"layers.0.ffn.experts.W13", "refused"},
                                                          {"layers.0.ffn.experts.W2", "admitted"}}));
  ASSERT_TRUE(layers.contains("layers.0.ffn.experts.W13")) << run.out;
  const nlohmann::json& w13 = layers["layers.0.ffn.experts.W13"];
  ASSERT_FALSE(w13["first_refused"].empty()) << w13.dump();
  EXPECT_EQ(w13["groups"], 3);  // two routed experts and the shared one
  EXPECT_EQ(w13["tensors"].back(), "layers.0.ffn.shared_experts.w3.scale");
  EXPECT_EQ(w13["first_refused"][0]["tensor"], "layers.0.ffn.shared_experts.w3.scale");
}

TEST(AuditCli, FlagsAreChecked) {
  EXPECT_EQ(Mxdiff("").status, 2);
  EXPECT_EQ(Mxdiff("--format=xml " + kFixtures + "/clean").status, 2);
  EXPECT_EQ(Mxdiff("--threads=-1 " + kFixtures + "/clean").status, 2);
  EXPECT_EQ(Mxdiff("--model=v100 " + kFixtures + "/clean").status, 2);  // another command's flag
  const CliRun pattern = Mxdiff("--pattern='.*w2\\.scale' --format=json " + kFixtures + "/clean");
  EXPECT_EQ(pattern.status, 0) << pattern.err;
  EXPECT_EQ(nlohmann::json::parse(pattern.out)["summary"]["layers"], 1);
  // An empty pattern is no selection at all: bad input in one line, not the default selection.
  for (const char* empty : {"--pattern=", "--pattern ''"}) {
    const CliRun run = Mxdiff(std::string(empty) + " " + kFixtures + "/clean");
    EXPECT_EQ(run.status, 2) << empty << ": " << run.out << run.err;
    EXPECT_EQ(run.out, "") << empty;
    EXPECT_EQ(run.err, "mxdiff audit: --pattern is empty: give a regular expression over whole tensor names, or "
                       "leave the flag out for the default selection\n")
        << empty;
  }
  const CliRun help = Mxdiff("--help");
  EXPECT_EQ(help.status, 0);
  for (const char* flag : {"--format", "--[no]keep-going", "--pattern", "--threads", "--max-positions"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " missing from\n" << help.out;
  }
}

}  // namespace
}  // namespace mxdiff::checkpoint
