// mxdiff gate CHECKPOINT: the merge verdict for the folded kernel on a real checkpoint (issue 18;
// tools/gate/README.md). The flags are parsed and checked here; the steps are tools/gate/.
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "tools/gate/gate_run.h"
#include "tools/mxdiff/commands.h"
#include "reference/status_macros.h"

ABSL_DECLARE_FLAG(std::string, arms);    // bench_command.cc's: here the arms the exactness step replays
ABSL_DECLARE_FLAG(uint64_t, seed);       // calibrate_command.cc's
ABSL_DECLARE_FLAG(double, budget_s);     // bench_command.cc's: per bench measurement
ABSL_FLAG(std::string, layers, "", "gate: MoE layers, comma-separated (layers.0,...), or all; empty: the first");
ABSL_FLAG(int, tp, 1, "gate: tensor-parallel size the weights are sliced for");
ABSL_FLAG(int, rank, 0, "gate: tensor-parallel rank, 0..tp-1");
ABSL_FLAG(int, cases, 256, "gate: replays per arm and layer in the exactness step");
ABSL_FLAG(double, fuzz_time, 60, "gate: seconds of fuzz_layer after the replays (see tools/gate/README.md)");
ABSL_FLAG(double, speed_time, 0,
          "gate: seconds for the whole-layer benches of all chosen layers together, split evenly over the layers and "
          "their 4 measurements (at least 0.2 s, at most --budget_s each); 0: --budget_s each");
ABSL_FLAG(std::string, report, "", "gate: folder for report.md, report.json and the figures (created)");

#ifndef MXDIFF_TOOL_COMMIT
#define MXDIFF_TOOL_COMMIT "unknown"
#endif

namespace mxdiff::cli {
namespace {

// The source tree's commit where it is a git checkout (with "+changes" where files differ from
// it), else the one this binary was configured at.
std::string ToolCommit() {
  const std::string command = fmt::format("git -C '{}' describe --always --dirty=+changes --abbrev=12 2>/dev/null",
                                          MXDIFF_SOURCE_DIR);
  std::string commit;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[128];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) commit += buffer;
    if (::pclose(pipe) != 0) commit.clear();
  }
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == ' ')) commit.pop_back();
  return commit.empty() ? fmt::format("{} (at configure time)", MXDIFF_TOOL_COMMIT) : commit;
}

absl::Status ParseArms(const std::string& text, std::vector<Transform>& arms) {
  arms.clear();
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  for (const std::string& arm : parts) {
    if (arm == "ordinary") arms.push_back(Transform::kOrdinary);
    else if (arm == "folded") arms.push_back(Transform::kFolded);
    else return absl::InvalidArgumentError(fmt::format("--arms: unknown arm '{}' (ordinary, folded)", arm));
  }
  return absl::OkStatus();
}

absl::Status ReadOptions(std::span<const std::string_view> args, gate::GateRunConfig& config) {
  gate::GateOptions& o = config.options;
  if (args.empty()) return absl::InvalidArgumentError("no checkpoint (usage: mxdiff gate CHECKPOINT [--flags])");
  o.paths.assign(args.begin(), args.end());
  const std::string layers = absl::GetFlag(FLAGS_layers);
  o.all_layers = layers == "all";
  if (!layers.empty() && !o.all_layers) o.layers = std::vector<std::string>(absl::StrSplit(layers, ','));
  o.parallel = {.tp = absl::GetFlag(FLAGS_tp), .rank = absl::GetFlag(FLAGS_rank)};
  if (o.parallel.tp < 1 || o.parallel.tp > 1024) return absl::InvalidArgumentError("--tp must be 1..1024");
  if (o.parallel.rank < 0 || o.parallel.rank >= o.parallel.tp) {
    return absl::InvalidArgumentError(fmt::format("--rank={} is out of range for --tp={} (0..{})", o.parallel.rank,
                                                  o.parallel.tp, o.parallel.tp - 1));
  }
  MXDIFF_RETURN_IF_ERROR(ParseArms(absl::GetFlag(FLAGS_arms), o.arms));
  o.cases = absl::GetFlag(FLAGS_cases);
  o.fuzz_seconds = absl::GetFlag(FLAGS_fuzz_time);
  o.bench_budget_s = absl::GetFlag(FLAGS_budget_s);
  if (o.cases < 1 || o.cases > 1'000'000) return absl::InvalidArgumentError("--cases must be 1..1000000");
  if (!(o.fuzz_seconds >= 0 && o.fuzz_seconds <= 86400)) return absl::InvalidArgumentError("--fuzz-time must be 0..86400");
  if (!(o.bench_budget_s > 0)) return absl::InvalidArgumentError("--budget_s must be > 0");
  o.speed_seconds = absl::GetFlag(FLAGS_speed_time);
  if (!(o.speed_seconds >= 0 && o.speed_seconds <= 86400)) return absl::InvalidArgumentError("--speed_time must be 0..86400");
  o.seed = absl::GetFlag(FLAGS_seed);
  if (o.seed == 0) o.seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  config.report_dir = absl::GetFlag(FLAGS_report);
  config.tool_commit = ToolCommit();
  return absl::OkStatus();
}

}  // namespace

int GateCommand(std::span<const std::string_view> args) {
  gate::GateRunConfig config;
  // A report left by an earlier gate would read as this one's verdict if this one stops: gone first.
  if (const std::string dir = absl::GetFlag(FLAGS_report); !dir.empty()) {
    std::error_code ignored;
    for (const char* name : {"report.json", "report.md", "audit_histograms.png", "bench.json", "bench_rounds.png"}) {
      std::filesystem::remove(std::filesystem::path(dir) / name, ignored);
    }
  }
  if (absl::Status s = ReadOptions(args, config); !s.ok()) {
    fmt::print(stderr, "mxdiff gate: {}\n", std::string(s.message()));
    return kExitBadInput;
  }
  if (!config.report_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(config.report_dir, error);
    if (!std::filesystem::is_directory(config.report_dir)) {
      fmt::print(stderr, "mxdiff gate: --report={}: cannot create the folder\n", config.report_dir);
      return kExitBadInput;
    }
  }
  fmt::print(stderr, "gate: seed {} (replay with --seed={})\n", config.options.seed, config.options.seed);
  return gate::RunGate(config);
}

}  // namespace mxdiff::cli
