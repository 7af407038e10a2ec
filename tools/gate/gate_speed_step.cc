// Step 5: speed, soundly. The bench library (tools/bench/bench_driver.h, `mxdiff bench`'s method:
// pinned tactic, A B B A with the swapped and A/A controls, the naive protocol beside it, tune on
// first use: the seed engine's mechanism) on the W13 and W2 shapes of the chosen layers as sliced
// (same N and K; bench-drawn weights), ordinary (A) against folded (B), a decode step of one token
// (top-k experts + the shared one, a row each); then, per chosen layer, the whole layer's graph
// (tools/bench/layer_bench.h: route, W13, SwiGLU, W2, combine; us per layer, the unit the seed
// measured) with that layer's real, sliced weights. The decision is DecideSpeed's (gate_speed.h).
// A GEMM the audit refused on every chosen layer runs ordinary in both arms and is not timed
// alone. CUDA builds only; skipped where the exactness step found no device.
#include <span>

#include "fmt/format.h"
#include "tools/gate/gate_context.h"

#if MXDIFF_HAVE_CUDA
#include "tools/bench/bench_driver.h"
#include "tools/bench/layer_bench.h"
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

// The arms as `mxdiff bench --arms` names them: the builtin pair, or the two kernel libraries
// (the candidate asked for the folded transform, both under --ext_model).
std::string ArmsText(const GateOptions& o) {
  return o.libraries() ? fmt::format("ext:{},ext-folded:{}", o.baseline_kernel, o.candidate_kernel) : "ordinary,folded";
}

// What both benches share: the arms, the naive protocol with tune on first use (the builtin pair
// only), seed, device.
bench::BenchConfig BaseConfig(const GateContext& context, double budget_s) {
  bench::BenchConfig config;
  const GateOptions& o = context.options;
  config.a = o.libraries() ? bench::ArmSpec{.kind = bench::ArmKind::kExternal, .transform = Transform::kOrdinary,
                                            .tactic = std::nullopt, .library = o.baseline_kernel, .text = "ext:" + o.baseline_kernel}
                           : *bench::ParseArmSpec("ordinary");
  config.b = o.libraries() ? bench::ArmSpec{.kind = bench::ArmKind::kExternal, .transform = Transform::kFolded,
                                            .tactic = std::nullopt, .library = o.candidate_kernel, .text = "ext-folded:" + o.candidate_kernel}
                           : *bench::ParseArmSpec("folded");
  config.ext_model = o.kernel_model;
  // The naive protocol captures graphs, which a library's host call cannot be part of.
  config.naive = !o.libraries();
  config.first_use = FirstUse::kTune;
  config.stopping.budget_seconds = budget_s;
  config.seed = context.options.seed;
  config.device = context.options.device;
  config.log = [](const std::string& line) { fmt::print(stderr, "gate: speed: {}\n", line); };
  return config;
}

bench::BenchConfig GemmConfig(const GateContext& context, const Timed& timed) {
  const checkpoint::MoeLayerWeights& w = *context.layers.front().weights;
  bench::BenchConfig config = BaseConfig(context, context.options.bench_budget_s);
  if (timed.w13) config.shapes.push_back({fmt::format("W13 {}", w.layer), 2 * w.intermediate, w.hidden});
  if (timed.w2) config.shapes.push_back({fmt::format("W2 {}", w.layer), w.hidden, w.intermediate});
  config.groups = context.layers.front().top_k + (w.shared_expert ? 1 : 0);
  config.rows_per_group = 1;
  config.command = fmt::format("mxdiff bench --arms={} --shapes={} --experts={} --rows=1 {} --budget_s={} --bench_seed={}",
                               ArmsText(context.options),
                               fmt::format("{}{}{}", timed.w13 ? fmt::format("{}x{}", 2 * w.intermediate, w.hidden) : "",
                                           timed.w13 && timed.w2 ? "," : "",
                                           timed.w2 ? fmt::format("{}x{}", w.hidden, w.intermediate) : ""),
                               config.groups,
                               context.options.libraries()
                                   ? fmt::format("--ext_model={}", StepModelName(context.options.kernel_model))
                                   : "--naive --first_use=tune",
                               config.stopping.budget_seconds, config.seed);
  return config;
}

// The whole layer's graph with this layer's real, sliced weights (loaded again where step 3
// dropped them, dropped after). An error of the bench is a measurement without a verdict.
SpeedMeasurement LayerMeasurement(GateContext& context, GateLayer& layer, double budget_s) {
  SpeedMeasurement m{.name = layer.name, .layer = true,
                     .candidate_runs = layer.w13_rank.admitted || layer.w2_rank.admitted};
  m.report.shape = bench::ShapeSpec{layer.name, layer.weights->hidden, layer.weights->intermediate, true};
  if (layer.weights->w13_codes.empty()) {
    if (absl::Status loaded = LoadLayerWeights(context, layer); !loaded.ok()) {
      m.report.error = std::string(loaded.message());
      return m;
    }
  }
  const checkpoint::MoeLayerWeights& w = *layer.weights;
  bench::LayerBenchSpec spec;
  spec.name = layer.name;
  spec.shape = w.shape(layer.top_k);
  spec.tokens = 1;
  spec.policy = FallbackPolicy::kFallback;  // a GEMM refused on this rank runs ordinary, as deployed
  spec.write_weights = [&w](MoeLayer& device) {
    absl::Status status = device.WriteWeights(MoeGemm::kW13, 0, w.w13_codes, w.w13_scales);
    return status.ok() ? device.WriteWeights(MoeGemm::kW2, 0, w.w2_codes, w.w2_scales) : status;
  };
  const bench::BenchConfig config = BaseConfig(context, budget_s);
  absl::StatusOr<bench::ShapeReport> report = bench::RunLayerBench(spec, config);
  if (report.ok()) m.report = *std::move(report);
  else m.report.error = report.status().ToString();
  if (context.layers.size() > 1) DropLayerWeights(layer);
  return m;
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
  const bench::BenchConfig config = GemmConfig(context, timed);
  const double layer_budget = LayerBudgetSeconds(context.options, context.layers.size());
  step.command = context.options.libraries() ? config.command : fmt::format("{}; the whole layers: {}", config.command,
                             GateCommandFor(context, fmt::format("--seed={} --budget_s={} --speed_time={}",
                                                                 context.options.seed, context.options.bench_budget_s,
                                                                 context.options.speed_seconds)));
  const absl::StatusOr<bench::BenchReport> report = bench::RunBench(config);
  if (!report.ok()) {
    step.outcome = StepOutcome::kNoVerdict;
    step.summary = fmt::format("the bench could not run: {}", report.status().ToString());
    return step;
  }
  context.bench = *report;
  context.gpu = report->device;
  for (const bench::ShapeReport& shape : report->shapes) {
    context.speed.push_back({.name = shape.shape.name, .layer = false, .candidate_runs = true, .report = shape});
  }
  // Two kernel libraries: no layer graph runs them; the GEMMs are the unit.
  for (GateLayer& layer : context.options.libraries() ? std::span<GateLayer>() : std::span<GateLayer>(context.layers)) {
    fmt::print(stderr, "gate: speed: {}: the whole layer, {:.2f} s per measurement\n", layer.name, layer_budget);
    context.speed.push_back(LayerMeasurement(context, layer, layer_budget));
    context.bench.shapes.push_back(context.speed.back().report);
  }
  SpeedDecision decision =
      DecideSpeed(context.speed, context.options.libraries() ? SpeedUnit::kGemm : SpeedUnit::kLayer);
  step.outcome = decision.outcome;
  step.summary = fmt::format("{} on {}", decision.summary, report->device);
  step.details = std::move(decision.details);
  if (context.options.libraries()) {
    step.details.push_back(fmt::format("two kernel libraries ({} against {}): W13 and W2 timed alone as host calls (the "
                                       "C ABI takes host memory: copies in and out, and whatever the library does per "
                                       "call, are in both arms' times); no whole-layer graph runs them",
                                       context.candidate->name(), context.baseline->name()));
  }
  if (!timed.w13 || !timed.w2) {
    step.details.push_back(fmt::format("{} refused on this rank in every chosen layer: ordinary in both arms, not timed "
                                       "alone", timed.w13 ? "W2" : "W13"));
  }
  return step;
}

#endif  // MXDIFF_HAVE_CUDA

}  // namespace mxdiff::gate
