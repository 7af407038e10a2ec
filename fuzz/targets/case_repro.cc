// repro's parts of the case format (fuzz/driver/fuzz_target.h: CaseFormatRepro): on a GEMM case it
// prints the case, the verdict of every CPU target of the format (the registry's), the route, and for
// every kernel module the flags select (the builtin kernels where a GPU exists, --external) fuzz_gemm's
// checks and the first mismatching elements against the reference with the first divergent
// accumulation step. --minimize shrinks a case while its first finding keeps its signature; --json
// has every check's verdict. tools/repro/README.md documents the output.
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "fuzz/mutators/case_minimizer.h"
#include "reference/admission.h"
#include "reference/reference_gemm.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

// The target fuzz_gemm's checks are credited to (its file, fuzz/targets/fuzz_gemm.cc, defines it).
constexpr std::string_view kDifferentialTarget = "fuzz_gemm";

// Human text: stdout, or stderr with --json (stdout then holds the verdict alone).
std::FILE* text = stdout;

std::string Bits16(uint16_t bits) { return fmt::format("0x{:04x} ({})", bits, f16_to_f32(bits)); }
std::string Bits32(uint32_t bits) { return fmt::format("0x{:08x} ({})", bits, bits_to_f32(bits)); }

std::string StepText(const TraceStep& step) {
  return step.k < 0 ? fmt::format("reduction add of split {}", step.split)
                    : fmt::format("split {} k {}..{}", step.split, step.k, step.k + 3);
}

struct Arithmetic {
  Transform transform;
  StepModel model;
  size_t reproduced = 0;  // of the module's mismatching elements, how many it gives bit for bit
};

// Every arithmetic (transform x step model) other than the reference's, ranked by how many of the
// kernel's mismatching elements it reproduces bit for bit, ties broken toward the model the module
// follows (the case's own for an external kernel), then the case's model field, then the same
// transform. Several models often agree on an element (v100 and exact differ only where truncation
// shows), so the whole output decides, and every arithmetic that reproduces anything is listed.
std::vector<Arithmetic> ReproducingArithmetics(const FuzzCase& c, Transform transform, StepModel model,
                                               const Tactic& tactic, std::span<const uint16_t> output,
                                               std::span<const size_t> mismatches) {
  std::vector<Arithmetic> found;
  for (Transform t : {Transform::kOrdinary, Transform::kFolded}) {
    for (StepModel m : kAllStepModels) {
      if (t == transform && m == model) continue;
      ReferenceOptions options;
      options.transform = t;
      options.model = m;
      options.tactic = tactic;
      std::vector<uint16_t> other;
      if (!ReferenceGemm(c.Problem(), options, other).ok()) continue;
      Arithmetic a{t, m};
      for (size_t i : mismatches) a.reproduced += other[i] == output[i] ? 1 : 0;
      if (a.reproduced > 0) found.push_back(a);
    }
  }
  auto preference = [&](const Arithmetic& a) {
    return (a.model == model ? 0 : a.model == c.model ? 2 : 4) + (a.transform == transform ? 0 : 1);
  };
  std::stable_sort(found.begin(), found.end(), [&](const Arithmetic& a, const Arithmetic& b) {
    return a.reproduced != b.reproduced ? a.reproduced > b.reproduced : preference(a) < preference(b);
  });
  return found;
}

std::string ArithmeticName(const Arithmetic& a, StepModel module_model, StepModel case_model) {
  std::string text = fmt::format("{} under {}", TransformName(a.transform), StepModelName(a.model));
  if (a.model == module_model) text += " (the module's model)";
  else if (a.model == case_model) text += " (the case's model)";
  return text;
}

// Where the best reproducing arithmetic's trace of one element leaves the reference's.
void ExplainElement(const FuzzCase& c, const Arithmetic& reference_arithmetic, const Arithmetic* best,
                    StepModel module_model, const Tactic& tactic, int row, int column, uint16_t kernel_bits,
                    uint16_t reference_bits) {
  if (f16_is_nan(kernel_bits) && f16_is_nan(reference_bits)) {
    fmt::print(text, "    both are NaN: the kernel's payload is 0x{:04x}, the reference's 0x{:04x}; every model gives the "
               "canonical NaN, so the kernel writes a NaN no model writes\n",
               kernel_bits, reference_bits);
    return;
  }
  ReferenceOptions options;
  options.transform = reference_arithmetic.transform;
  options.model = reference_arithmetic.model;
  options.tactic = tactic;
  const absl::StatusOr<ElementTrace> reference = TraceElement(c.Problem(), options, row, column);
  if (!reference.ok()) {
    fmt::print(text, "    trace unavailable: {}\n", reference.status().ToString());
    return;
  }
  absl::StatusOr<ElementTrace> other = absl::NotFoundError("no arithmetic");
  if (best != nullptr) {
    options.transform = best->transform;
    options.model = best->model;
    other = TraceElement(c.Problem(), options, row, column);
  }
  if (!other.ok() || other->result_f16 != kernel_bits) {
    fmt::print(text, "    no step model and no transform reproduces {} here; the reference's last steps:\n",
               Bits16(kernel_bits));
    const size_t first = reference->steps.size() > 3 ? reference->steps.size() - 3 : 0;
    for (size_t i = first; i < reference->steps.size(); ++i) {
      fmt::print(text, "      {}: {}\n", StepText(reference->steps[i]), Bits32(reference->steps[i].accumulator));
    }
    return;
  }
  const std::string name = ArithmeticName(*best, module_model, c.model);
  for (size_t i = 0; i < reference->steps.size() && i < other->steps.size(); ++i) {
    if (reference->steps[i].accumulator == other->steps[i].accumulator) continue;
    fmt::print(text, "    first divergent accumulation step, against {}: {}: reference {} vs {}\n", name,
               StepText(reference->steps[i]), Bits32(reference->steps[i].accumulator),
               Bits32(other->steps[i].accumulator));
    return;
  }
  fmt::print(text, "    against {}: the traces differ only in the final rounding\n", name);
}

// Explains the bits the named checks judged: the module's own run, never a second one.
void ExplainRun(const ModuleRun& run, const FuzzCase& c, int show) {
  const StepModel model = run.model;
  fmt::print(text, "\nmodule {} (tactic {}, model {}):\n", run.module, TacticName(run.tactic), StepModelName(model));
  fmt::print(text, "  route expected: {}\n",
             run.expected.ok() ? fmt::format("{} ({})", TransformName(run.expected->variant),
                                             RouteReasonName(run.expected->reason))
                               : run.expected.status().ToString());
  if (run.unsupported) {
    const std::string why(run.route.status().message());
    fmt::print(text, "  the module does not support this case (not a finding){}{}\n", why.empty() ? "" : ": ", why);
    return;
  }
  if (!run.route.ok()) {
    fmt::print(text, "  run: {}\n", run.route.status().ToString(absl::StatusToStringMode::kWithNoExtraData));
    return;
  }
  const absl::StatusOr<Route>& route = run.route;
  fmt::print(text, "  route taken:    {} ({}) {}\n", TransformName(route->variant), RouteReasonName(route->reason),
             route->detail);
  const Tactic judged = JudgedTactic(run);  // the plan the reference followed
  if (run.ran_plan && (judged.cta_k != run.tactic.cta_k ||
                       judged.splits != effective_splits(c.k, run.tactic.cta_k, run.tactic.splits) ||
                       !run.ran_plan->kernel.empty())) {
    fmt::print(text, "  plan it ran:    {} (the case's: cta_k {}, {} split(s))\n", DescribeRanPlan(*run.ran_plan),
               run.tactic.cta_k, effective_splits(c.k, run.tactic.cta_k, run.tactic.splits));
  }
  if (run.reference.empty() && !run.output.empty()) {
    fmt::print(text, "  (not compared: an earlier check of this module found something)\n");
    return;
  }
  const std::vector<uint16_t>& output = run.output;
  const std::vector<uint16_t>& reference = run.reference;
  std::vector<size_t> mismatches;
  for (size_t i = 0; i < output.size(); ++i) {
    if (output[i] != reference[i]) mismatches.push_back(i);
  }
  fmt::print(text, "  {} of {} elements differ from the reference ({} {})\n", mismatches.size(), output.size(),
             TransformName(route->variant), StepModelName(model));
  if (mismatches.empty()) return;
  const std::vector<Arithmetic> reproducing =
      ReproducingArithmetics(c, route->variant, model, judged, output, mismatches);
  if (reproducing.empty()) {
    fmt::print(text, "  no other step model or transform reproduces any of them\n");
  } else {
    fmt::print(text, "  other arithmetics that reproduce the kernel's bits:\n");
    for (const Arithmetic& a : reproducing) {
      fmt::print(text, "    {}: {} of the {} mismatching elements\n", ArithmeticName(a, model, c.model), a.reproduced,
                 mismatches.size());
    }
  }
  if (run.ran_plan && (judged.cta_k != run.tactic.cta_k ||
                       judged.splits != effective_splits(c.k, run.tactic.cta_k, run.tactic.splits))) {
    // A module that reports one plan and runs another: does the case's own plan give its bits?
    ReferenceOptions options;
    options.transform = route->variant;
    options.model = model;
    options.tactic = run.tactic;
    std::vector<uint16_t> requested;
    if (ReferenceGemm(c.Problem(), options, requested).ok()) {
      size_t same = 0;
      for (size_t i : mismatches) same += requested[i] == output[i];
      fmt::print(text, "  the case's own plan (cta_k {}, {} split(s)) reproduces {} of the {} mismatching elements{}\n",
                 run.tactic.cta_k, effective_splits(c.k, run.tactic.cta_k, run.tactic.splits), same,
                 mismatches.size(), same == mismatches.size() ? ": the module ran it, not the plan it reported" : "");
    }
  }
  for (size_t shown = 0; shown < mismatches.size() && int(shown) < show; ++shown) {
    const size_t i = mismatches[shown];
    const int row = int(i / size_t(c.n)), column = int(i % size_t(c.n));
    fmt::print(text, "  mismatch [{}][{}] (index {}): kernel {} reference {} {}, scales {}\n", row, column, i,
               Bits16(output[i]), Bits16(reference[i]), F16DistanceText(output[i], reference[i]),
               ScaleClassOfColumn(c, c.scale_bytes, row, column));
    if (shown == 0) {
      ExplainElement(c, Arithmetic{route->variant, model}, reproducing.empty() ? nullptr : &reproducing.front(),
                     model, judged, row, column, output[i], reference[i]);
    }
  }
}


// The CPU properties repro checks on every GEMM case: the registry's cpu targets of the case
// format, each with every finding of its checks.
std::vector<TargetFinding> CpuTargetFindings(std::span<const uint8_t> bytes, bool print) {
  std::vector<TargetFinding> found;
  for (const FuzzTarget* target : Registry()) {
    if (target->options.kind != "cpu" || target->format != "case") continue;
    const InputFindings findings = target->check(bytes, /*fresh=*/false);
    const CheckResult first = findings ? FirstFindingOf(*findings) : std::nullopt;
    if (print) {
      fmt::print(text, "{:<15} {}\n", target->name,
                 first ? "FINDING " + first->signature + "\n  " + first->description : "ok");
    }
    if (first) found.push_back({std::string(target->name), *first});
  }
  return found;
}

// fuzz_gemm's modules as the flags select them. A device that matches no step model is a finding
// of its own (appended to `findings`): nothing it computes can be judged, so no module is loaded.
// A library that is not a kernel (no entry, another ABI, a null descriptor) is bad input, checked
// before anything else: its FailedPrecondition is never the device's calibration refusal.
absl::StatusOr<LoadedModules> LoadSelectedModules(const ReproOptions& options, std::vector<TargetFinding>& findings) {
  if (!options.external.empty()) {
    const absl::StatusOr<std::unique_ptr<GemmModule>> external = LoadExternalModule(options.external);
    if (!external.ok()) {
      return absl::InvalidArgumentError(fmt::format("--external: {}", std::string(external.status().message())));
    }
  }
  const ModuleSelection selection{options.modules, options.disable_modules, options.external};
  absl::StatusOr<LoadedModules> loaded = LoadModules(selection);
  if (!loaded.ok() && loaded.status().code() == absl::StatusCode::kFailedPrecondition) {
    findings.push_back({std::string(kDifferentialTarget), {"calibration/no-model", std::string(loaded.status().message())}});
    loaded = LoadedModules{{}, std::string(loaded.status().message()) + "\n"};
  }
  if (!loaded.ok()) return absl::Status(loaded.status().code(), loaded.status().ToString());  // repro's line
  return loaded;
}

// fuzz_gemm's oracle (fuzz/README.md, "fuzz_gemm's oracle"): the device reference for large cases
// where there is one, 1 in 16 of them (the same cases as fuzz_gemm's default) also on the CPU, so
// an oracle/device-vs-cpu finding replays; the CPU reference alone elsewhere.
std::unique_ptr<ReferenceOracle> DeviceOracleOrNone() {
  absl::StatusOr<std::unique_ptr<ReferenceOracle>> oracle = MakeDeviceReferenceOracle();
  return oracle.ok() ? *std::move(oracle) : nullptr;
}

// The route DecideRoute takes over the case's own registry, where it has one.
void PrintRegistryRoute(const FuzzCase& c, const LayerAdmission& admission) {
  if (c.registry.empty()) return;
  const absl::StatusOr<Route> route =
      DecideRoute(c.Registry(), c.tactic, c.request, c.policy, admission.admitted, admission.Describe());
  fmt::print(text, "route over the case's registry: {}\n",
             route.ok() ? fmt::format("{} ({}) {}", TransformName(route->variant), RouteReasonName(route->reason),
                                      route->detail)
                        : route.status().ToString());
}

// The session: the modules loaded once, one differential over them.
class CaseRepro : public ReproSession {
 public:
  explicit CaseRepro(const ReproOptions& options) : ReproSession(options) { text = options.text; }

  absl::StatusOr<std::vector<TargetFinding>> Explain(const std::string& path, std::span<const uint8_t> input) override {
    absl::StatusOr<FuzzCase> decoded = DecodeCase(input);
    if (!decoded.ok()) return absl::InvalidArgumentError(fmt::format("{} is not a valid case: {}", path, decoded.status().ToString()));
    case_ = *std::move(decoded);
    const FuzzCase& c = *case_;
    // The modules first: one that cannot load is bad input before anything runs or is printed.
    std::vector<TargetFinding> calibration;
    const absl::StatusOr<std::string> report = Open(calibration);
    if (!report.ok()) return report.status();
    fmt::print(text, "{}\n{}", path, DescribeCase(c));
    const LayerAdmission admission = AdmitLayer(c.scale_bytes);
    fmt::print(text, "  admission: {}\n\n", admission.Describe());
    std::vector<TargetFinding> findings = CpuTargetFindings(input, /*print=*/true);
    findings.insert(findings.end(), calibration.begin(), calibration.end());
    PrintRegistryRoute(c, admission);
    fmt::print(text, "\n{}", *report);
    evaluation_ = differential_->Evaluate(c, input);  // its bytes pick the CPU-checked sample, as fuzz_gemm's
    fmt::print(text, "fuzz_gemm checks{}:\n",
               differential_->modules().empty() ? " (CPU side only: the reference against itself)" : "");
    for (const CheckVerdict& verdict : evaluation_.verdicts) {
      fmt::print(text, "  {:<13} {:<16} {}\n", verdict.check, verdict.module,
                 verdict.finding ? "FINDING " + verdict.finding->signature + "\n    " + verdict.finding->description
                                 : "ok");
    }
    if (const CheckVerdict* first = evaluation_.FirstFinding()) {
      findings.push_back({std::string(kDifferentialTarget), *first->finding, std::string(first->check), first->module});
    }
    for (const ModuleRun& run : evaluation_.runs) ExplainRun(run, c, options_.show);
    return findings;
  }

  absl::StatusOr<std::string> StartSequence() override { return Open(calibration_); }

  std::vector<TargetFinding> Replay(std::span<const uint8_t> input) override {
    const absl::StatusOr<FuzzCase> c = DecodeCase(input);
    if (!c.ok()) return {};
    std::vector<TargetFinding> found = CpuTargetFindings(input, /*print=*/false);
    const CaseEvaluation evaluation = differential_->Evaluate(*c, input);
    if (const CheckVerdict* first = evaluation.FirstFinding()) {
      found.push_back({std::string(kDifferentialTarget), *first->finding, std::string(first->check), first->module});
    }
    return found;
  }

  std::vector<TargetFinding> SessionFindings() const override { return calibration_; }
  std::string SessionNote() const override {
    return calibration_.empty() ? "" : " (and the device matches no step model)";
  }

  absl::Status Minimize(const std::string& path, const TargetFinding& finding) override {
    MinimizeOptions options;
    options.max_evaluations = options_.minimize_evaluations;
    const MinimizeResult result = MinimizeCase(
        *case_, [&](const FuzzCase& candidate) { return SignatureOf(finding, candidate) == finding.finding.signature; },
        options);
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(result.minimized);
    const std::string out = path + ".min";
    if (bytes.ok()) {
      std::ofstream file(out, std::ios::binary);
      file.write(reinterpret_cast<const char*>(bytes->data()), std::streamsize(bytes->size()));
      file.close();  // a write error shows at the flush
      if (!file) bytes = absl::PermissionDeniedError(fmt::format("cannot write {}", out));
    }
    if (!bytes.ok()) return bytes.status();
    fmt::print(text, "\nminimized (signature {} kept; {} edits of {} candidates{}): {}\n{}", finding.finding.signature,
               result.accepted, result.evaluations, result.exhausted ? ", budget spent" : "", out,
               DescribeCase(result.minimized));
    return absl::OkStatus();
  }

  std::vector<std::string> Declined() const override {
    std::vector<std::string> declined;
    for (const ModuleRun& run : evaluation_.runs) {
      if (run.unsupported) declined.push_back(run.module);
    }
    return declined;
  }

  std::vector<ReproRanPlan> RanPlans() const override {
    std::vector<ReproRanPlan> plans;
    for (const ModuleRun& run : evaluation_.runs) {
      if (!run.ran_plan || !case_) continue;
      plans.push_back({run.module, run.ran_plan->cta_k, run.ran_plan->splits, run.ran_plan->kernel, run.tactic.cta_k,
                       effective_splits(case_->k, run.tactic.cta_k, run.tactic.splits)});
    }
    return plans;
  }

  std::vector<ReproCheckVerdict> CheckVerdicts() const override {
    std::vector<ReproCheckVerdict> verdicts;
    for (const CheckVerdict& v : evaluation_.verdicts) {
      verdicts.push_back({std::string(v.check), v.module, !v.finding.has_value(), v.finding ? v.finding->signature : ""});
    }
    return verdicts;
  }

 private:
  // Loads the modules and makes the differential (once); the loader's report.
  absl::StatusOr<std::string> Open(std::vector<TargetFinding>& findings) {
    absl::StatusOr<LoadedModules> loaded = LoadSelectedModules(options_, findings);
    if (!loaded.ok()) return loaded.status();
    differential_ =
        std::make_unique<GemmDifferential>(std::move(loaded->modules), DeviceOracleOrNone());
    return loaded->report;
  }

  // The finding's signature, recomputed on another case by the check that found it.
  std::optional<std::string> SignatureOf(const TargetFinding& finding, const FuzzCase& c) {
    CheckResult again;
    const FuzzTarget* target = FindTarget(finding.target);
    if (target != nullptr && target->options.kind == "cpu") {
      const absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
      const InputFindings findings = bytes.ok() ? target->check(*bytes, /*fresh=*/false) : std::nullopt;
      if (findings) again = FirstFindingOf(*findings);
    } else {
      // The evaluation outlives the pointer FirstFinding returns into it.
      const CaseEvaluation evaluation = differential_->Evaluate(c);
      if (const CheckVerdict* first = evaluation.FirstFinding()) again = first->finding;
    }
    if (!again) return std::nullopt;
    return again->signature;
  }

  std::optional<FuzzCase> case_;  // the case Explain saw
  CaseEvaluation evaluation_;     // and fuzz_gemm's checks of it
  std::unique_ptr<GemmDifferential> differential_;
  std::vector<TargetFinding> calibration_;  // a sequence's: the device matches no step model
};

// --emit: a clean case goes in as fuzz_gemm's unless its file name names a target.
absl::StatusOr<std::string> EmitCase(const FuzzTarget& target, std::span<const uint8_t> input, const std::string& path,
                                     const TargetFinding* first, const std::string& regressions_dir) {
  const FuzzTarget* differential = FindTarget(kDifferentialTarget);
  return EmitAsFinding(differential != nullptr ? *differential : target, input, path, first, regressions_dir);
}

}  // namespace

ReproParts CaseFormatRepro() {
  return ReproParts{
      .cases = "GEMM",
      .open = [](const FuzzTarget&, const ReproOptions& options) -> std::unique_ptr<ReproSession> {
        return std::make_unique<CaseRepro>(options);
      },
      .emit = EmitCase,
      .minimize = true,
      .json = true,
  };
}

}  // namespace mxdiff::fuzz
