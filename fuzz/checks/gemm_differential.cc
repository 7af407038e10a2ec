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

}  // namespace

GemmDifferential::GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules,
                                   std::unique_ptr<ReferenceOracle> device_oracle, OracleSettings settings,
                                   std::unique_ptr<DeviceRecipeWeights> device_weights)
    : modules_(std::move(modules)),
      weights_(counters_, std::move(device_weights)),
      references_(std::move(device_oracle), settings, weights_, counters_) {}

CaseEvaluation GemmDifferential::Evaluate(const FuzzCase& c, std::span<const uint8_t> input) {
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

// One call into the module and one into the checks: the module runs the case (and again), the
// reference for the plan that ran is asked for, then every named check judges the run.
void GemmDifferential::EvaluateModule(const FuzzCase& c, GemmModule& module, const LayerAdmission& admission,
                                      CaseEvaluation& evaluation) {
  ModuleRun& run = evaluation.runs.emplace_back();
  run.module = module.name();
  run.model = module.model().value_or(c.model);
  run.output.assign(size_t(c.rows()) * size_t(c.n), kOutputPoison);
  run.again_output = run.output;
  {
    PhaseTimer timer(counters_.seconds_in(Phase::kKernels));
    static_cast<CaseRun&>(run) = RunModule(module, c, admission, run);
    run.health = module.CheckHealth();  // a device-wide wait
  }
  const absl::StatusCode code = run.route.status().code();
  if (code == absl::StatusCode::kUnimplemented) {
    run.unsupported = true;
    ++runs_unsupported_;
  } else if (code == absl::StatusCode::kResourceExhausted && run.expected.status().code() != code) {
    run.unsupported = true;  // out of device memory for this case: a refused case, never a kernel finding
    ++counters_.runs_refused;
  } else if (run.route.ok()) {
    Judge(c, run, evaluation.verdicts);  // may record device-vs-cpu verdicts first
  }
  CheckModuleRun(c, run, admission, weights_, evaluation.verdicts);
}

CaseRun GemmDifferential::RunModule(GemmModule& module, const FuzzCase& c, const LayerAdmission& admission,
                                    ModuleRun& run) {
  if (!module.TakesRecipeWeights()) return module.RunCase(weights_.HostCase(), admission, run.output, run.again_output);
  if (weights_.deferred()) {
    absl::StatusOr<const DeviceCaseWeights*> on_device = weights_.OnDevice();
    if (!on_device.ok()) {
      CaseRun failed;
      failed.route = on_device.status();
      return failed;
    }
    module.UseDeviceWeights(**on_device);
  }
  return module.RunCase(c, admission, run.output, run.again_output);
}

void GemmDifferential::Judge(const FuzzCase& c, ModuleRun& run, std::vector<CheckVerdict>& verdicts) {
  ReferencePlan plan = PlanOfTactic(run.route->variant, run.model, run.route->tactic);
  if (run.ran_plan) {  // the module ran another plan than its tactic's: the reference follows it
    absl::StatusOr<ReferencePlan> reported = PlanOfReport(run.route->variant, run.model, *run.ran_plan, c.k);
    if (!reported.ok()) {
      run.unjudged = Finding{fmt::format("abi/{}/unknown-plan", run.module),
                             fmt::format("{} reported {}; its bits were not compared", run.module,
                                         std::string(reported.status().message()))};
      return;
    }
    plan = *reported;
  }
  if (c.rows() > 0) {  // with no rows nothing ran, whatever plan the request named
    CountPlan(counters_, run.module, plan.cta_k, effective_splits(c.k, plan.cta_k, plan.splits),
              run.ran_plan ? run.ran_plan->kernel : std::string());
  }
  absl::StatusOr<const std::vector<uint16_t>*> reference = references_.Judge(plan, run.output, verdicts);
  if (!reference.ok()) {
    run.unjudged =
        Finding{"reference/rejected-valid-case", fmt::format("ReferenceGemm: {}", reference.status().ToString())};
    return;
  }
  run.reference = **reference;
  counters_.elements_compared += run.output.size();
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
