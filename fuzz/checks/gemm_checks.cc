#include "fuzz/checks/gemm_checks.h"

#include <algorithm>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/checks/output_scan.h"
#include "fuzz/driver/coverage_counters.h"
#include "fuzz/modules/external_module.h"
#include "reference/scale_class.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

std::string TacticSignature(const FuzzCase& c, const Tactic& t) {
  return fmt::format("{}x{}x{}/s{}", t.cta_m, t.cta_n, t.cta_k, effective_splits(c.k, t.cta_k, t.splits));
}

bool SameRouteButSwizzle(const Route& a, const Route& b) {
  Tactic a_tactic = a.tactic;
  a_tactic.swizzle = b.tactic.swizzle;
  return a.variant == b.variant && a.reason == b.reason && a_tactic == b.tactic;
}

std::string RouteOrError(const absl::StatusOr<Route>& route) {
  // Without payloads: an external kernel's failure kind (external_module.h) is in the signature.
  return route.ok() ? DescribeRoute(*route) : route.status().ToString(absl::StatusToStringMode::kWithNoExtraData);
}

}  // namespace

std::string DescribeRanPlan(const RanPlan& plan) {
  return fmt::format("cta_k {} (chunk {}), {} split(s){}", plan.cta_k, plan.cta_k > 0 ? split_chunk_k(plan.cta_k) : 0,
                     plan.splits, plan.kernel.empty() ? "" : ", kernel " + plan.kernel);
}

Tactic JudgedTactic(const ModuleRun& run) {
  Tactic tactic = run.route->tactic;
  if (run.ran_plan) {
    tactic.cta_k = run.ran_plan->cta_k;
    tactic.splits = run.ran_plan->splits;
  }
  return tactic;
}

const CheckVerdict* CaseEvaluation::FirstFinding() const {
  for (const CheckVerdict& verdict : verdicts) {
    if (verdict.finding) return &verdict;
  }
  return nullptr;
}

std::string ScaleClassOfColumn(const FuzzCase& c, std::span<const uint8_t> scale_bytes, int row, int column) {
  const size_t blocks = size_t(c.k) / kBlockK;
  const size_t first = (size_t(c.group_of_row(row)) * size_t(c.n) + size_t(column)) * blocks;
  ScaleClass most_unusual = ScaleClass::kAdmitted;
  for (size_t b = 0; b < blocks; ++b) most_unusual = std::min(most_unusual, ClassifyScale(scale_bytes[first + b]));
  return std::string(ScaleClassName(most_unusual));
}

namespace {

CheckResult CheckHealth(const ModuleRun& run) {
  if (run.health.ok()) return std::nullopt;
  return Finding{fmt::format("cuda-error/{}", run.module),
                 fmt::format("{} left the device unhealthy after tactic {}: {}", run.module, TacticName(run.tactic),
                             run.health.ToString())};
}

CheckResult CheckInputs(const ModuleRun& run) {
  const std::string& changed = *run.inputs_changed;
  if (changed.empty()) return std::nullopt;
  return Finding{fmt::format("abi/{}/inputs-modified", run.module),
                 fmt::format("{} wrote into its inputs, which it may only read (fuzz/modules/"
                             "mxdiff_kernel_abi.h): {}. It ran on a private copy: the reference and "
                             "the other checks saw the case as it is",
                             run.module, changed)};
}

CheckResult CheckRoute(const FuzzCase& c, const ModuleRun& run, const LayerAdmission& admission) {
  const std::string& name = run.module;
  if (!run.route.ok() || !run.expected.ok()) {
    if (!run.route.ok() && !run.expected.ok() && run.route.status().code() == run.expected.status().code()) {
      const bool untouched = std::all_of(run.output.begin(), run.output.end(),
                                         [](uint16_t bits) { return bits == kOutputPoison; });
      if (!untouched) {
        return Finding{fmt::format("route/{}/output-written-on-error", name),
                       fmt::format("{} failed ({}) but wrote the output", name,
                                   run.route.status().ToString(absl::StatusToStringMode::kWithNoExtraData))};
      }
      CountRouteError(c.request, c.policy, run.route.status().code());
      return std::nullopt;
    }
    // An external kernel's failure that names its kind ("python/bound: ...") is told apart by it.
    const std::string kind = run.route.ok() ? std::string() : FailureKindOf(run.route.status());
    return Finding{fmt::format("route/{}/{}{}{}", name, run.route.ok() ? "ran-where-it-must-fail" : "unexpected-error",
                               kind.empty() ? "" : "/", kind),
                   fmt::format("{} with tactic {}: got {}, expected {}", name, TacticName(run.tactic),
                               RouteOrError(run.route), RouteOrError(run.expected))};
  }
  CountRoute(*run.route);
  if (run.route->variant == Transform::kFolded && !admission.admitted) {
    return Finding{"route/folded-on-refused",
                   fmt::format("{} ran folded on a refused layer: {}", name, admission.Describe())};
  }
  if (*run.route != *run.expected) {
    return Finding{fmt::format("route/{}/{}-instead-of-{}", name, RouteReasonName(run.route->reason),
                               RouteReasonName(run.expected->reason)),
                   fmt::format("{} reported route {}, the dispatch rules demand {}", name, DescribeRoute(*run.route),
                               DescribeRoute(*run.expected))};
  }
  return std::nullopt;
}

CheckResult CheckWritten(const FuzzCase& c, const ModuleRun& run) {
  const Route& route = *run.route;
  const size_t unwritten = FirstUnwritten(run.output);
  if (unwritten == run.output.size()) return std::nullopt;
  return Finding{fmt::format("no-launch/{}/{}", run.module, TacticSignature(c, route.tactic)),
                 fmt::format("{} returned route {} but left element {} (of {}) unwritten", run.module,
                             DescribeRoute(route), unwritten, run.output.size())};
}

CheckResult CheckBits(const FuzzCase& c, const ModuleRun& run, CaseWeights& weights) {
  if (run.unjudged) return run.unjudged;
  const Route& route = *run.route;
  const size_t i = FirstWrittenMismatch(run.output, run.reference);
  if (i >= run.output.size()) return std::nullopt;
  const int row = int(i / size_t(c.n)), column = int(i % size_t(c.n));
  const std::string& name = run.module;
  return Finding{fmt::format("mismatch/{}{}/{}/{}", name == TransformName(route.variant) ? "" : name + "/",
                             TransformName(route.variant), TacticSignature(c, JudgedTactic(run)),
                             ScaleClassOfColumn(c, weights.HostScales(), row, column)),
                 fmt::format("{}: element [{}][{}] is 0x{:04x} ({}), the reference ({} {}) says 0x{:04x} ({}), "
                             "{}; route {}{}",
                             name, row, column, run.output[i], f16_to_f32(run.output[i]), TransformName(route.variant),
                             StepModelName(run.model), run.reference[i], f16_to_f32(run.reference[i]),
                             F16DistanceText(run.output[i], run.reference[i]), DescribeRoute(route),
                             run.ran_plan ? "; the module reported running " + DescribeRanPlan(*run.ran_plan) : "")};
}

// The case again, in another tile order where the module has one: the same route, plan and bits.
CheckResult CheckDeterminism(const FuzzCase& c, const ModuleRun& run) {
  const Route& route = *run.route;
  const absl::StatusOr<Route>& again = run.again;
  if (again.ok() && run.again_plan != run.ran_plan) {  // repro could not replay the plan
    return Finding{fmt::format("nondeterminism/{}/plan", run.module),
                   fmt::format("{}: the case again reported {}, the first run {}", run.module,
                               run.again_plan ? DescribeRanPlan(*run.again_plan) : "no plan",
                               run.ran_plan ? DescribeRanPlan(*run.ran_plan) : "no plan")};
  }
  const std::vector<uint16_t>& second = run.again_output;
  if (again.ok() && SameRouteButSwizzle(*again, route) && second == run.output) return std::nullopt;
  size_t first_difference = 0;
  while (first_difference < second.size() && second[first_difference] == run.output[first_difference]) {
    ++first_difference;
  }
  return Finding{fmt::format("nondeterminism/{}/{}", run.module, TacticSignature(c, route.tactic)),
                 fmt::format("{}: the case again with tactic {} gave {}", run.module, TacticName(run.again_tactic),
                             !again.ok()                           ? again.status().ToString()
                             : !SameRouteButSwizzle(*again, route) ? "route " + DescribeRoute(*again)
                                                                   : fmt::format("element {}: 0x{:04x}, first run "
                                                                                 "0x{:04x}",
                                                                                 first_difference,
                                                                                 second[first_difference],
                                                                                 run.output[first_difference]))};
}

}  // namespace

void CheckModuleRun(const FuzzCase& c, const ModuleRun& run, const LayerAdmission& admission, CaseWeights& weights,
                    std::vector<CheckVerdict>& verdicts) {
  auto verdict = [&](size_t check, CheckResult finding) {
    verdicts.push_back({kCheckNames[check], run.module, std::move(finding)});
  };
  verdict(kHealthCheck, CheckHealth(run));
  // Whatever the run returned (a kernel may write its inputs and then decline the case).
  if (run.inputs_changed) verdict(kInputsCheck, CheckInputs(run));
  if (run.unsupported) return;
  verdict(kRouteCheck, CheckRoute(c, run, admission));
  if (!run.route.ok()) return;  // no route ran: nothing was written to compare
  verdict(kWrittenCheck, CheckWritten(c, run));
  verdict(kBitsCheck, CheckBits(c, run, weights));
  verdict(kDeterminismCheck, CheckDeterminism(c, run));
}

CheckResult CheckCrossModule(const std::vector<uint16_t>* ordinary_bits, const std::vector<uint16_t>* folded_bits) {
  // The claim the seed project made, checked directly (the bits check implies it).
  if (ordinary_bits == nullptr || folded_bits == nullptr || *ordinary_bits == *folded_bits) return std::nullopt;
  return Finding{"mismatch/ordinary-vs-folded", "ordinary and folded kernels differ on an admitted layer"};
}

CheckResult CheckCpuSide(Transform transform, const absl::Status& single_status, const std::vector<uint16_t>& single,
                         const absl::StatusOr<const std::vector<uint16_t>*>& multi) {
  if (!single_status.ok() || !multi.ok()) {
    return Finding{"reference/rejected-valid-case",
                   fmt::format("ReferenceGemm: {}",
                               single_status.ok() ? multi.status().ToString() : single_status.ToString())};
  }
  if (single != **multi) {
    return Finding{fmt::format("nondeterminism/reference/{}", TransformName(transform)),
                   "the reference gives different bits single-threaded and multi-threaded"};
  }
  return std::nullopt;
}

}  // namespace mxdiff::fuzz
