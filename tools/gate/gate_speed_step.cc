// Step 5: speed, soundly. The bench library (tools/bench/bench_driver.h, `mxdiff bench`'s method:
// pinned tactic, A B B A with the swapped and A/A controls, the naive protocol beside it) on the
// W13 and W2 shapes of the chosen layers as sliced (same N and K), ordinary (A) against folded
// (B), a decode step of one token (top-k experts + the shared one, a row each). Its verdict per
// shape maps through SpeedOutcome. A GEMM the audit refused on every chosen layer runs ordinary
// in both arms and is not timed. CUDA builds only; skipped where the exactness step found no device.
#include "fmt/format.h"
#include "tools/gate/gate_context.h"

#if MXDIFF_HAVE_CUDA
#include "tools/bench/bench_driver.h"
#endif

namespace mxdiff::gate {

#if !MXDIFF_HAVE_CUDA

absl::StatusOr<StepResult> RunSpeedStep([[maybe_unused]] GateContext& context) {
  return StepResult{.step = GateStep::kSpeed, .outcome = StepOutcome::kSkipped,
                    .summary = "no CUDA device (this build has no CUDA)", .command = "mxdiff bench"};
}

#else

namespace {

struct Timed {
  bool w13 = false, w2 = false;  // benched: admitted on some chosen layer
};

bench::BenchConfig SpeedConfig(const GateContext& context, const Timed& timed) {
  const checkpoint::MoeLayerWeights& w = *context.layers.front().weights;
  bench::BenchConfig config;
  config.a = *bench::ParseArmSpec("ordinary");
  config.b = *bench::ParseArmSpec("folded");
  if (timed.w13) config.shapes.push_back({fmt::format("W13 {}", w.layer), 2 * w.intermediate, w.hidden});
  if (timed.w2) config.shapes.push_back({fmt::format("W2 {}", w.layer), w.hidden, w.intermediate});
  config.groups = context.layers.front().top_k + (w.shared_expert ? 1 : 0);
  config.rows_per_group = 1;
  config.naive = true;
  config.stopping.budget_seconds = context.options.bench_budget_s;
  config.seed = context.options.seed;
  config.device = context.options.device;
  config.command = fmt::format("mxdiff bench --arms=ordinary,folded --shapes={} --experts={} --rows=1 --naive "
                               "--budget_s={} --bench_seed={}",
                               fmt::format("{}{}{}", timed.w13 ? fmt::format("{}x{}", 2 * w.intermediate, w.hidden) : "",
                                           timed.w13 && timed.w2 ? "," : "",
                                           timed.w2 ? fmt::format("{}x{}", w.hidden, w.intermediate) : ""),
                               config.groups, config.stopping.budget_seconds, config.seed);
  return config;
}

// The sound measurement's per-call medians of a shape: {A, B}, or nothing.
std::optional<std::pair<double, double>> Medians(const bench::ShapeReport& shape) {
  for (const bench::ExperimentReport& e : shape.experiments) {
    if (e.protocol == bench::Protocol::kSound && e.has_analysis()) {
      return std::make_pair(e.result.analysis.a.median, e.result.analysis.b.median);
    }
  }
  return std::nullopt;
}

StepOutcome Combine(StepOutcome a, StepOutcome b) {
  if (a == StepOutcome::kFailed || b == StepOutcome::kFailed) return StepOutcome::kFailed;
  if (a == StepOutcome::kPassed && b == StepOutcome::kPassed) return StepOutcome::kPassed;
  return StepOutcome::kNoVerdict;
}

void PerLayerTimes(GateContext& context, const Timed& timed, const std::vector<std::pair<double, double>>& medians) {
  const checkpoint::MoeLayerWeights& timed_shape = *context.layers.front().weights;
  for (GateLayer& layer : context.layers) {
    if (layer.weights->hidden != timed_shape.hidden || layer.weights->intermediate != timed_shape.intermediate) {
      continue;  // another shape than the one timed: no figure for it (the notes say not every layer was timed)
    }
    double baseline = 0, candidate = 0;
    size_t shape = 0;
    for (bool w13 : {true, false}) {
      const bool is_timed = w13 ? timed.w13 : timed.w2;
      const bool admitted = w13 ? layer.w13_rank.admitted : layer.w2_rank.admitted;
      if (!is_timed) continue;
      baseline += medians[shape].first;
      candidate += admitted ? medians[shape].second : medians[shape].first;
      ++shape;
    }
    layer.baseline_us = baseline;
    layer.candidate_us = candidate;
  }
}

}  // namespace

absl::StatusOr<StepResult> RunSpeedStep(GateContext& context) {
  StepResult step{.step = GateStep::kSpeed, .outcome = StepOutcome::kSkipped, .command = "mxdiff bench"};
  if (!context.no_device_reason.empty()) {
    step.summary = context.no_device_reason;
    return step;
  }
  Timed timed;
  for (const GateLayer& layer : context.layers) {
    timed.w13 |= layer.w13_rank.admitted;
    timed.w2 |= layer.w2_rank.admitted;
  }
  if (!timed.w13 && !timed.w2) {
    step.outcome = StepOutcome::kNoVerdict;
    step.summary = "every GEMM of the chosen layers is refused on this rank: folded never runs there, nothing to time";
    return step;
  }
  bench::BenchConfig config = SpeedConfig(context, timed);
  step.command = config.command;
  config.log = [](const std::string& line) { fmt::print(stderr, "gate: speed: {}\n", line); };
  const absl::StatusOr<bench::BenchReport> report = bench::RunBench(config);
  if (!report.ok()) {
    step.outcome = StepOutcome::kNoVerdict;
    step.summary = fmt::format("the bench could not run: {}", report.status().ToString());
    return step;
  }
  StepOutcome outcome = StepOutcome::kPassed;
  std::vector<std::pair<double, double>> medians;
  for (const bench::ShapeReport& shape : report->shapes) {
    outcome = Combine(outcome, SpeedOutcome(shape.verdict.verdict));
    step.details.push_back(fmt::format("{} (N {} K {}, {} experts x 1 row, tactic {} from {}): {}: {}", shape.shape.name,
                                       shape.shape.n, shape.shape.k, shape.groups, shape.tactic, shape.tactic_source,
                                       bench::VerdictName(shape.verdict.verdict), shape.verdict.message));
    medians.push_back(Medians(shape).value_or(std::make_pair(0.0, 0.0)));
  }
  if (!timed.w13 || !timed.w2) {
    step.details.push_back(fmt::format("{} refused on this rank in every chosen layer: ordinary in both arms, not timed", timed.w13 ? "W2" : "W13"));
  }
  step.outcome = outcome;
  step.summary = fmt::format("{} shape(s) timed on {}: {}", report->shapes.size(), report->device, StepOutcomeName(outcome));
  context.gpu = report->device;
  PerLayerTimes(context, timed, medians);
  return step;
}

#endif  // MXDIFF_HAVE_CUDA

}  // namespace mxdiff::gate
