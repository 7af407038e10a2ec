#include "tools/gate/gate_run.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "fmt/format.h"
#include "checkpoint/expert_weights.h"
#include "nlohmann/json.hpp"
#include "reference/admission.h"
#include "reference/exit_status.h"
#include "reference/status_macros.h"
#include "tools/cli/child_process.h"
#include "kernels/route.h"
#include "tools/gate/gate_report.h"

namespace mxdiff::gate {
namespace {

using StepFunction = absl::StatusOr<StepResult> (*)(GateContext&);

std::string FirstLine(std::string_view text) { return std::string(text.substr(0, text.find('\n'))); }
std::string LastLine(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  const size_t at = text.rfind('\n');
  return std::string(at == std::string_view::npos ? text : text.substr(at + 1));
}

// The model-wide lines: us per token summed over the measured layers beside one layer x layers,
// and whether an accuracy run can change.
void ModelNotes(GateContext& context, const std::vector<StepResult>& steps) {
  const std::optional<PerToken> per_token = ModelPerToken(context.speed, context.moe_layers);
  context.notes.push_back(per_token ? PerTokenLine(*per_token)
                          : context.options.libraries()
                              ? "us per token: not measured (two kernel libraries: W13 and W2 are timed alone, no "
                                "layer graph runs them)"
                              : "us per token: not measured (the speed step did not time every chosen layer's whole "
                                "graph)");
  const bool exact_ran = !context.layers.empty() &&
                         std::all_of(context.layers.begin(), context.layers.end(), [](const GateLayer& l) { return l.exactness_ran; });
  const bool exact = exact_ran && std::all_of(context.layers.begin(), context.layers.end(),
                                              [](const GateLayer& l) { return l.exact_between_arms; });
  bool failed = false;
  for (const StepResult& step : steps) failed |= step.step == GateStep::kExactness && step.outcome == StepOutcome::kFailed;
  context.notes.push_back(
      exact ? context.options.libraries()
                  ? "every W13 and W2 output of the chosen layers is bit-identical between the two libraries in every "
                    "case: an accuracy run (the seed's GSM8K-64) cannot change and need not be run"
                  : "every chosen layer's output is bit-identical between the arms in every replay: an accuracy run (the "
                    "seed's GSM8K-64) cannot change and need not be run"
      : failed ? "a bit differs between the arms (or from the reference): an accuracy run must be run before any claim"
               : "the arms' outputs were not compared on the device: whether an accuracy run can change is not decided");
}

// Runs tools/gate|bench/<script> --json=INPUT --out=DIR/FIGURE with the first python3 that draws
// it (Debian's python3-matplotlib is /usr/bin/python3's; PATH's python3 may be another one),
// from an argument vector: DIR is the user's and never reaches a shell. The figure is listed,
// else a note says why not.
void Draw(std::string_view script_path, const std::filesystem::path& input, const std::string& dir,
          const std::string& figure, GateReport& report) {
  const std::filesystem::path script = std::filesystem::exists(script_path)
                                           ? std::filesystem::path(script_path)
                                           : std::filesystem::path(MXDIFF_SOURCE_DIR) / script_path;
  std::string why = "python3 failed";
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    // --name=VALUE: a folder that starts with '-' stays the value.
    const std::vector<std::string> argv = {python, script.string(), "--json=" + input.string(),
                                           "--out=" + (std::filesystem::path(dir) / figure).string()};
    const absl::StatusOr<cli::ChildRun> run = cli::RunChild(argv, cli::ChildStderr::kMerged);
    if (run.ok() && run->exit_status == 0) {
      report.figures.push_back(figure);
      return;
    }
    why = !run.ok() ? std::string(run.status().message()) : run->out.empty() ? why : LastLine(run->out);
  }
  report.notes.push_back(fmt::format("no figure: {}: {}", figure, why));
}

// The audit's byte histogram per chosen GEMM as a PNG (tools/gate/plot_gate.py), or a note why not.
void Figures(GateContext& context, const std::string& dir, GateReport& report) {
  nlohmann::json data = nlohmann::json::array();
  for (const GateLayer& layer : context.layers) {
    for (const GemmAudit* gemm : {&layer.w13, &layer.w2}) {
      nlohmann::json bins = nlohmann::json::object();
      for (size_t raw = 0; raw < 256; ++raw) {
        if (gemm->histogram[raw] != 0) bins[std::to_string(raw)] = gemm->histogram[raw];
      }
      data.push_back({{"layer", gemm->name}, {"admitted", gemm->admitted}, {"histogram", bins}});
    }
  }
  const std::filesystem::path input = std::filesystem::path(dir) / ".audit_histograms.json.partial";
  std::ofstream(input) << data.dump();
  Draw("tools/gate/plot_gate.py", input, dir, "audit_histograms.png", report);
  std::filesystem::remove(input);
}

// The bench's own report of every measurement (per-round samples of both arms under every
// protocol) as bench.json, and its per-round timings drawn by tools/bench/plot_bench.py (W13, W2
// and the first kFigureLayers layers; bench.json holds them all).
constexpr size_t kFigureLayers = 4;
void BenchFigures(const GateContext& context, const std::string& dir, GateReport& report) {
  if (context.bench.shapes.empty()) return;
  const std::filesystem::path json = std::filesystem::path(dir) / "bench.json";
  std::ofstream(json) << MarkGateBenchJson(bench::ReportJson(context.bench));
  report.bench_json = "bench.json";
  bench::BenchReport drawn = context.bench;
  const size_t gemms = size_t(std::count_if(context.speed.begin(), context.speed.end(),
                                            [](const SpeedMeasurement& m) { return !m.layer; }));
  if (drawn.shapes.size() > gemms + kFigureLayers) drawn.shapes.resize(gemms + kFigureLayers);
  const std::filesystem::path input = std::filesystem::path(dir) / ".bench_rounds.json.partial";
  std::ofstream(input) << bench::ReportJson(drawn);
  Draw("tools/bench/plot_bench.py", input, dir, "bench_rounds.png", report);
  std::filesystem::remove(input);
}

std::string DriverVersion() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  std::getline(file, line);
  return line;
}

}  // namespace

std::string GateCommandFor(const GateContext& context, std::string_view extra) {
  std::vector<std::string> layers, arms;
  for (const GateLayer& layer : context.layers) layers.push_back(layer.name);
  for (Transform arm : context.options.arms) arms.push_back(std::string(TransformName(arm)));
  const GateOptions& o = context.options;
  const std::string pair = o.libraries() ? fmt::format("--baseline_kernel={} --candidate_kernel={} --ext_model={}",
                                                       o.baseline_kernel, o.candidate_kernel, StepModelName(o.kernel_model))
                                         : fmt::format("--arms={}", fmt::join(arms, ","));
  return fmt::format("mxdiff gate {} --layers={} --tp={} --rank={} {} {}", fmt::join(o.paths, " "),
                     fmt::join(layers, ","), o.parallel.tp, o.parallel.rank, pair, extra);
}

namespace {

// All input is checked before a line is printed, so that bad input is one line on stderr: the
// report folder, then step 1 (the audit reads every header and scale byte of the checkpoint and
// finds the chosen layers), then what step 3 would refuse in each chosen layer's headers. Only
// then is the report folder created. Step 1's result comes back for its progress line.
absl::StatusOr<StepResult> CheckInputs(const GateRunConfig& config, GateContext& context) {
  if (!config.report_dir.empty()) MXDIFF_RETURN_IF_ERROR(CheckReportFolder(config.report_dir));
  MXDIFF_RETURN_IF_ERROR(LoadKernelLibraries(context));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<StepResult> audit = RunAuditStep(context);
  if (!audit.ok()) return audit.status();
  audit->seconds = SecondsSince(start);
  for (const GateLayer& layer : context.layers) {
    MXDIFF_RETURN_IF_ERROR(checkpoint::CheckMoeLayerWeights(context.audit.checkpoint, layer.name, context.options.parallel));
  }
  if (!config.report_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(config.report_dir, error);
    if (!std::filesystem::is_directory(config.report_dir)) {
      return absl::InvalidArgumentError(fmt::format("--report={}: cannot create the folder{}", config.report_dir,
                                                    error ? fmt::format(" ({})", error.message()) : ""));
    }
  }
  return audit;
}

void PrintStepDone(int i, const StepResult& step) {
  fmt::print(stderr, "gate: [{}/{}] {}: {} ({:.1f} s): {}\n", i + 1, kGateSteps, GateStepName(GateStep(i)),
             StepOutcomeName(step.outcome), step.seconds, step.summary);
}

}  // namespace

int RunGate(const GateRunConfig& config) {
  GateContext context{.options = config.options, .findings_dir = config.report_dir};
  if (context.findings_dir.empty()) context.findings_dir = "mxdiff-findings";
  absl::StatusOr<StepResult> audit = CheckInputs(config, context);
  if (!audit.ok()) {
    fmt::print(stderr, "mxdiff gate: {}\n", FirstLine(std::string(audit.status().message())));
    return kExitBadInput;
  }
  fmt::print(stderr, "gate: seed {} (replay with --seed={})\n", config.options.seed, config.options.seed);
  fmt::print(stderr, "gate: [1/{}] {} ...\n", kGateSteps, GateStepName(GateStep::kAudit));
  PrintStepDone(0, *audit);
  std::vector<StepResult> steps{*std::move(audit)};
  // Steps 2-5. An error here is input that only reading the bytes could refuse (a shard changed
  // or unreadable since step 1): still bad input.
  static constexpr StepFunction kSteps[kGateSteps] = {RunAuditStep, RunProofStep, RunWeightsStep, RunExactnessStep,
                                                      RunSpeedStep};
  for (int i = 1; i < kGateSteps; ++i) {
    fmt::print(stderr, "gate: [{}/{}] {} ...\n", i + 1, kGateSteps, GateStepName(GateStep(i)));
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<StepResult> step = kSteps[i](context);
    if (!step.ok()) {
      fmt::print(stderr, "mxdiff gate: {}\n", FirstLine(std::string(step.status().message())));
      return kExitBadInput;
    }
    step->seconds = SecondsSince(start);
    PrintStepDone(i, *step);
    steps.push_back(*std::move(step));
  }
  ModelNotes(context, steps);
  GateReport report{.checkpoint = fmt::format("{}", fmt::join(config.options.paths, " ")),
                    .tool_commit = config.tool_commit, .admission_rule = AdmissionRuleVersion(), .gpu = context.gpu,
                    .driver = context.gpu.empty() ? "" : DriverVersion(),
                    .seeds = {{"gate (CPU reference cases, exactness replays, bench)", config.options.seed}},
                    .steps = steps, .notes = context.notes, .decision = DecideGate(steps),
                    .speed = context.speed, .per_token = ModelPerToken(context.speed, context.moe_layers)};
  fmt::print("mxdiff gate: {}: {}\n", GateVerdictName(report.decision.verdict), report.decision.reason);
  for (const std::string& note : context.notes) fmt::print("  {}\n", note);
  if (!config.report_dir.empty()) {
    RemoveEarlierReport(config.report_dir);  // decided: an earlier gate's files go, the user's stay
    Figures(context, config.report_dir, report);
    BenchFigures(context, config.report_dir, report);
    if (absl::Status written = WriteGateReport(config.report_dir, report); !written.ok()) {
      fmt::print(stderr, "mxdiff gate: {}\n", std::string(written.message()));
      return kExitBadInput;
    }
    fmt::print("report: {}/report.md, {}/report.json\n", config.report_dir, config.report_dir);
  }
  return report.decision.exit_status;
}

}  // namespace mxdiff::gate
