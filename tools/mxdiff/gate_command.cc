// mxdiff gate CHECKPOINT: the merge verdict for the folded kernel on a real checkpoint (issue 18;
// tools/gate/README.md). The flags are parsed and checked here; the steps are tools/gate/.
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "tools/cli/child_process.h"
#include "tools/gate/gate_run.h"
#include "tools/mxdiff/commands.h"
#include "reference/status_macros.h"

ABSL_DECLARE_FLAG(std::string, arms);    // bench_command.cc's: here the arms the exactness step replays
ABSL_DECLARE_FLAG(uint64_t, seed);       // calibrate_command.cc's
ABSL_DECLARE_FLAG(double, budget_s);     // bench_command.cc's: per bench measurement
ABSL_DECLARE_FLAG(std::string, ext_model);  // bench_command.cc's: the arithmetic two kernel libraries are asked for
ABSL_FLAG(std::string, baseline_kernel, "",
          "gate: a kernel library (fuzz/modules/mxdiff_kernel_abi.h) as the baseline, asked for the ordinary transform, "
          "in place of the builtin ordinary kernel; with --candidate_kernel");
ABSL_FLAG(std::string, candidate_kernel, "",
          "gate: a kernel library as the candidate, asked for the folded transform where this rank's bytes admit it, "
          "in place of the builtin folded kernel; with --baseline_kernel");
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
  const std::vector<std::string> argv = {"git", "-C", MXDIFF_SOURCE_DIR, "describe", "--always", "--dirty=+changes",
                                         "--abbrev=12"};
  const absl::StatusOr<ChildRun> run = RunChild(argv, ChildStderr::kDiscarded);
  std::string commit = run.ok() && run->exit_status == 0 ? run->out : "";
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == ' ')) commit.pop_back();
  return commit.empty() ? fmt::format("{} (at configure time)", MXDIFF_TOOL_COMMIT) : commit;
}

// The arms the exactness step replays: each once, and folded among them (the gate judges the
// folded kernel; a report without it would say nothing about it).
absl::Status ParseArms(const std::string& text, std::vector<Transform>& arms) {
  arms.clear();
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  for (const std::string& arm : parts) {
    if (arm == "ordinary") arms.push_back(Transform::kOrdinary);
    else if (arm == "folded") arms.push_back(Transform::kFolded);
    else return absl::InvalidArgumentError(fmt::format("--arms: unknown arm '{}' (ordinary, folded)", arm));
  }
  if (std::find(arms.begin(), arms.end(), Transform::kFolded) == arms.end()) {
    return absl::InvalidArgumentError(
        fmt::format("--arms={}: the gate judges the folded kernel, so folded must be one of the arms "
                    "(--arms=ordinary,folded or --arms=folded)", text));
  }
  for (size_t i = 1; i < arms.size(); ++i) {
    if (std::find(arms.begin(), arms.begin() + i, arms[i]) != arms.begin() + i) {
      return absl::InvalidArgumentError(fmt::format("--arms={}: {} is listed twice", text, parts[i]));
    }
  }
  return absl::OkStatus();
}

// --layers: "all", or MoE layer names, each once (a layer listed twice would run twice).
absl::Status ParseLayers(const std::string& text, gate::GateOptions& o) {
  o.all_layers = text == "all";
  if (text.empty() || o.all_layers) return absl::OkStatus();
  o.layers = absl::StrSplit(text, ',');
  for (size_t i = 0; i < o.layers.size(); ++i) {
    if (o.layers[i].empty()) return absl::InvalidArgumentError(fmt::format("--layers={}: an empty layer name", text));
    if (std::find(o.layers.begin(), o.layers.begin() + i, o.layers[i]) != o.layers.begin() + i) {
      return absl::InvalidArgumentError(fmt::format("--layers={}: {} is listed twice", text, o.layers[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadOptions(std::span<const std::string_view> args, gate::GateRunConfig& config) {
  gate::GateOptions& o = config.options;
  if (args.empty()) return absl::InvalidArgumentError("no checkpoint (usage: mxdiff gate CHECKPOINT [--flags])");
  o.paths.assign(args.begin(), args.end());
  MXDIFF_RETURN_IF_ERROR(ParseLayers(absl::GetFlag(FLAGS_layers), o));
  o.parallel = {.tp = absl::GetFlag(FLAGS_tp), .rank = absl::GetFlag(FLAGS_rank)};
  if (o.parallel.tp < 1 || o.parallel.tp > 1024) return absl::InvalidArgumentError("--tp must be 1..1024");
  if (o.parallel.rank < 0 || o.parallel.rank >= o.parallel.tp) {
    return absl::InvalidArgumentError(fmt::format("--rank={} is out of range for --tp={} (0..{})", o.parallel.rank,
                                                  o.parallel.tp, o.parallel.tp - 1));
  }
  MXDIFF_RETURN_IF_ERROR(ParseArms(absl::GetFlag(FLAGS_arms), o.arms));
  o.baseline_kernel = absl::GetFlag(FLAGS_baseline_kernel);
  o.candidate_kernel = absl::GetFlag(FLAGS_candidate_kernel);
  const std::optional<StepModel> kernel_model = ParseStepModel(absl::GetFlag(FLAGS_ext_model));
  if (!kernel_model) {
    return absl::InvalidArgumentError(fmt::format("unknown --ext_model '{}' (v100, sm90-emulated, sm90-emulated-ftz or "
                                                  "exact)", absl::GetFlag(FLAGS_ext_model)));
  }
  o.kernel_model = *kernel_model;
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

std::span<const OwnFlagHelp> GateOwnFlagHelp() {
  static constexpr OwnFlagHelp kHelp[] = {
      {"arms", "gate: the arms the exactness step replays, comma-separated, each once: ordinary, folded; folded must "
               "be one of them"},
      {"seed", "gate: seed of the CPU reference cases, the exactness replays and the bench (0: a fresh one, printed)"},
      {"budget_s", "gate: seconds per bench measurement (sound, swapped, A/A, naive) of the speed step"},
      {"ext_model", "gate: the step model two kernel libraries (--baseline_kernel, --candidate_kernel) are asked to "
                    "compute and are held to"},
  };
  return kHelp;
}

const std::string_view kGateExitStatuses =
    "exit status: 0 MERGE (every step ran and passed), 1 DO-NOT-MERGE (a step failed), 2 bad input (one line on "
    "stderr), 3 INCONCLUSIVE (a step could not run or decide, e.g. no GPU)\n";

int GateCommand(std::span<const std::string_view> args) {
  gate::GateRunConfig config;
  if (absl::Status s = ReadOptions(args, config); !s.ok()) {
    fmt::print(stderr, "mxdiff gate: {}\n", std::string(s.message()));
    return kExitBadInput;
  }
  return gate::RunGate(config);
}

}  // namespace mxdiff::cli
