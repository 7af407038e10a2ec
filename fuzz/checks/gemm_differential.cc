#include "fuzz/checks/gemm_differential.h"

#include <algorithm>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/checks/output_scan.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

// Cases up to this many multiply-adds also get the reference's own determinism check.
constexpr double kCpuSideWork = double(1 << 22);

// "activations: 3 of 4096 elements changed, the first [17]: 0x0001 -> 0x0000" for each input the
// kernel changed; "" where it left them all as they were.
template <typename T>
void DescribeChange(std::string_view input, const std::vector<T>& before, const std::vector<T>& after,
                    std::string& text) {
  if (before == after) return;  // memcmp speed: this runs after every run of an exposing module
  if (before.size() != after.size()) {
    text += fmt::format("{}{}: {} elements, now {}", text.empty() ? "" : "; ", input, before.size(), after.size());
    return;
  }
  const size_t first = size_t(std::mismatch(before.begin(), before.end(), after.begin()).first - before.begin());
  size_t changed = 0;
  for (size_t i = first; i < before.size(); ++i) changed += before[i] != after[i];
  text += fmt::format("{}{}: {} of {} elements changed, the first [{}]: 0x{:x} -> 0x{:x}", text.empty() ? "" : "; ",
                      input, changed, before.size(), first, before[first], after[first]);
}

}  // namespace

GemmDifferential::GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules,
                                   std::unique_ptr<ReferenceOracle> device_oracle, OracleSettings settings,
                                   std::unique_ptr<DeviceRecipeWeights> device_weights)
    : modules_(std::move(modules)),
      weights_(counters_, std::move(device_weights)),
      references_(std::move(device_oracle), settings, weights_, counters_) {}

CaseEvaluation GemmDifferential::Evaluate(const FuzzCase& c, std::span<const uint8_t> input) {
  kernel_inputs_of_ = nullptr;  // the same case object may hold another case now
  weights_.Begin(c);  // the case goes down once: every view of it and its reference read it there
  references_.Begin(input);
  CaseEvaluation evaluation = EvaluateAll(c);
  ++counters_.cases;
  ++counters_.cases_by_shape[size_t(references_.shape_class())];
  references_.End();
  counters_.host_weights_skipped += weights_.deferred();
  counters_.host_weights_late += weights_.late();
  return evaluation;
}

CaseEvaluation GemmDifferential::EvaluateAll(const FuzzCase& c) {
  CaseEvaluation evaluation;
  const LayerAdmission& admission = references_.Admission(evaluation.verdicts);
  for (const std::unique_ptr<GemmModule>& module : modules_) EvaluateModule(c, *module, admission, evaluation);
  bool any_ran = false;
  const std::vector<uint16_t>* ordinary_bits = nullptr;
  const std::vector<uint16_t>* folded_bits = nullptr;
  for (size_t i = 0; i < evaluation.runs.size(); ++i) {  // one run per module, in order
    const ModuleRun& run = evaluation.runs[i];
    if (run.unsupported || !run.route.ok()) continue;
    any_ran = true;
    if (modules_[i]->model().has_value()) {
      (run.route->variant == Transform::kFolded ? folded_bits : ordinary_bits) = &run.output;
    }
  }
  evaluation.verdicts.push_back({kCheckNames[kCrossModuleCheck], "", CheckCrossModule(ordinary_bits, folded_bits)});
  if (any_ran) ++cases_compared_;
  const double work = double(c.rows()) * double(c.n) * double(c.k);
  // The CPU reference's own determinism: on the small cases it judges, and on every case where no
  // module is loaded (the CPU side is then all there is). A large case that the loaded modules
  // all refused needs no reference: four CPU references of an `exact` 2^25-product case take
  // seconds (72% of an H200 campaign's worker time, 5 Dec).
  if (modules_.empty() || (work <= kCpuSideWork && !references_.large())) {
    CheckResult finding = CpuSide(c, evaluation);
    evaluation.verdicts.push_back({kCheckNames[kCpuSideCheck], "", std::move(finding)});
  }
  return evaluation;
}

// Runs the module once and every check that has something to look at; every verdict is kept.
void GemmDifferential::EvaluateModule(const FuzzCase& c, GemmModule& module, const LayerAdmission& admission,
                                      CaseEvaluation& evaluation) {
  ModuleRun& run = evaluation.runs.emplace_back();
  run.module = module.name();
  run.tactic = module.MapTactic(c);
  run.model = module.model().value_or(c.model);
  run.expected = module.ExpectedRoute(c, run.tactic, admission);
  run.output.assign(size_t(c.rows()) * size_t(c.n), kOutputPoison);
  const FuzzCase& input = module.TakesRecipeWeights() ? c : weights_.HostCase();  // its weights where it needs them
  inputs_changed_.clear();
  run.route = RunModule(module, input, run.tactic, run.output);
  if (run.route.ok()) run.ran_plan = module.ReportedPlan();
  auto verdict = [&](size_t check, CheckResult finding) {
    evaluation.verdicts.push_back({kCheckNames[check], run.module, std::move(finding)});
  };
  verdict(kHealthCheck, CheckHealth(Health(module), run));
  // Whatever the run returned (a kernel may write its inputs and then decline the case).
  const bool inputs_kept = !module.ExposesHostInputs() || inputs_changed_.empty();
  if (module.ExposesHostInputs()) verdict(kInputsCheck, CheckInputs(run, std::exchange(inputs_changed_, {})));
  const absl::StatusCode code = run.route.status().code();
  if (code == absl::StatusCode::kUnimplemented) {
    run.unsupported = true;
    ++runs_unsupported_;
    return;
  }
  // Out of device memory for this case: a refused case, never a kernel finding.
  if (code == absl::StatusCode::kResourceExhausted && run.expected.status().code() != code) {
    run.unsupported = true;
    ++counters_.runs_refused;
    return;
  }
  verdict(kRouteCheck, CheckRoute(c, run, admission));
  if (!run.route.ok()) return;  // no route ran: nothing was written to compare
  verdict(kWrittenCheck, CheckWritten(c, run));
  CheckResult bits = JudgeBits(c, run, evaluation);  // may record device-vs-cpu verdicts first
  verdict(kBitsCheck, std::move(bits));
  verdict(kDeterminismCheck, Determinism(input, module, run));
  CheckResult rerun = CheckInputs(run, std::exchange(inputs_changed_, {}));
  if (rerun && inputs_kept) verdict(kInputsCheck, std::move(rerun));
  verdict(kHealthCheck, CheckHealth(Health(module), run));
}

absl::StatusOr<Route> GemmDifferential::RunModule(GemmModule& module, const FuzzCase& c, const Tactic& tactic,
                                                  std::span<uint16_t> output) {
  PhaseTimer timer(counters_.seconds_in(Phase::kKernels));
  if (module.TakesRecipeWeights() && weights_.deferred()) {  // the weights are only on the device
    absl::StatusOr<const DeviceCaseWeights*> on_device = weights_.OnDevice();
    if (!on_device.ok()) return on_device.status();
    module.UseDeviceWeights(**on_device);
  }
  if (!module.ExposesHostInputs()) return module.Run(c, tactic, output);
  // Never the case's own buffers: the reference, the later modules and the next case's
  // materialization (MaterializationMemo) read them. The copy is made again only after a run
  // changed it; comparing it with the case after each run names what changed.
  if (kernel_inputs_of_ != &c) {
    kernel_inputs_ = c;  // the vectors keep their capacity across cases
    kernel_inputs_of_ = &c;
  }
  absl::StatusOr<Route> route = module.Run(kernel_inputs_, tactic, output);
  std::string changed;
  DescribeChange("row_offsets", c.row_offsets, kernel_inputs_.row_offsets, changed);
  DescribeChange("activations", c.activations, kernel_inputs_.activations, changed);
  DescribeChange("packed_codes", c.packed_codes, kernel_inputs_.packed_codes, changed);
  DescribeChange("scale_bytes", c.scale_bytes, kernel_inputs_.scale_bytes, changed);
  if (!changed.empty()) {
    kernel_inputs_of_ = nullptr;
    if (inputs_changed_.empty()) inputs_changed_ = std::move(changed);
  }
  return route;
}

absl::Status GemmDifferential::Health(GemmModule& module) {
  PhaseTimer timer(counters_.seconds_in(Phase::kKernels));  // a device-wide wait
  return module.CheckHealth();
}

CheckResult GemmDifferential::JudgeBits(const FuzzCase& c, ModuleRun& run, CaseEvaluation& evaluation) {
  ReferencePlan plan = PlanOfTactic(run.route->variant, run.model, run.route->tactic);
  if (run.ran_plan) {  // the module ran another plan than its tactic's: the reference follows it
    absl::StatusOr<ReferencePlan> reported = PlanOfReport(run.route->variant, run.model, *run.ran_plan, c.k);
    if (!reported.ok()) {
      return Finding{fmt::format("abi/{}/unknown-plan", run.module),
                     fmt::format("{} reported {}; its bits were not compared", run.module,
                                 std::string(reported.status().message()))};
    }
    plan = *reported;
  }
  CountPlan(counters_, run.module, plan.cta_k, effective_splits(c.k, plan.cta_k, plan.splits),
            run.ran_plan ? run.ran_plan->kernel : std::string());
  absl::StatusOr<const std::vector<uint16_t>*> reference = references_.Judge(plan, run.output, evaluation.verdicts);
  if (!reference.ok()) {
    return Finding{"reference/rejected-valid-case", fmt::format("ReferenceGemm: {}", reference.status().ToString())};
  }
  run.reference = **reference;
  counters_.elements_compared += run.output.size();
  return CheckBits(c, run, weights_);
}

// The case again in another tile order where the module has one, else the same launch again.
CheckResult GemmDifferential::Determinism(const FuzzCase& c, GemmModule& module, const ModuleRun& run) {
  const Tactic again_tactic = module.ReorderedTactic(run.tactic).value_or(run.tactic);
  std::vector<uint16_t> second(run.output.size(), kOutputPoison);
  const absl::StatusOr<Route> again = RunModule(module, c, again_tactic, second);
  if (again.ok() && module.ReportedPlan() != run.ran_plan) {  // repro could not replay the plan
    const std::optional<RanPlan> plan = module.ReportedPlan();
    return Finding{fmt::format("nondeterminism/{}/plan", run.module),
                   fmt::format("{}: the case again reported {}, the first run {}", run.module,
                               plan ? DescribeRanPlan(*plan) : "no plan",
                               run.ran_plan ? DescribeRanPlan(*run.ran_plan) : "no plan")};
  }
  return CheckDeterminism(c, run, again_tactic, again, second);
}

CheckResult GemmDifferential::CpuSide(const FuzzCase& c, CaseEvaluation& evaluation) {
  // The GPU side's oracle is only as good as its determinism across thread counts.
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    const ReferencePlan plan = PlanOfTactic(transform, c.model, c.tactic);
    std::vector<uint16_t> single;
    const absl::Status status = references_.CpuReferenceSingleThreaded(plan, single);
    const absl::StatusOr<const std::vector<uint16_t>*> multi = references_.CpuReference(plan, evaluation.verdicts);
    if (CheckResult finding = CheckCpuSide(transform, status, single, multi)) return finding;
  }
  return std::nullopt;
}

void GemmDifferential::ForgetState() {
  references_.ForgetState();
  weights_.ForgetState();
  for (const std::unique_ptr<GemmModule>& module : modules_) module->ForgetState();
}

CheckResult GemmDifferential::CheckCase(const FuzzCase& c, std::span<const uint8_t> input) {
  const CaseEvaluation evaluation = Evaluate(c, input);
  const CheckVerdict* first = evaluation.FirstFinding();
  return first != nullptr ? first->finding : std::nullopt;
}

absl::StatusOr<bool> DecodeForDifferential(std::span<const uint8_t> input, const GemmDifferential& differential,
                                           FuzzCase& c, MaterializationMemo* memo) {
  if (absl::Status status = DecodeCaseFields(input, c, memo); !status.ok()) return status;
  const bool skip_weights = !differential.NeedsHostWeights(c);
  MaterializeCase(c, 0, memo, skip_weights ? Materialize::kAllButWeights : Materialize::kYes);
  return skip_weights;
}

}  // namespace mxdiff::fuzz
