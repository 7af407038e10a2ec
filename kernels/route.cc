#include "kernels/route.h"

#include "absl/status/status.h"
#include "fmt/core.h"
#include "reference/status_macros.h"

namespace mxdiff {

std::string_view TransformName(Transform transform) {
  return transform == Transform::kOrdinary ? "ordinary" : "folded";
}

std::string_view TransformRequestName(TransformRequest request) {
  switch (request) {
    case TransformRequest::kOrdinary: return "ordinary";
    case TransformRequest::kFolded: return "folded";
    case TransformRequest::kAuto: return "auto";
  }
  return "invalid";
}

std::string_view FallbackPolicyName(FallbackPolicy policy) {
  return policy == FallbackPolicy::kFallback ? "fallback" : "fail-closed";
}

std::string_view RouteReasonName(RouteReason reason) {
  switch (reason) {
    case RouteReason::kOrdinaryRequested: return "ordinary-requested";
    case RouteReason::kFoldedAdmitted: return "folded-admitted";
    case RouteReason::kLayerRefused: return "layer-refused";
    case RouteReason::kFoldedMissing: return "folded-missing";
  }
  return "invalid";
}

std::string DescribeRoute(const Route& route) {
  return fmt::format("{} {} ({})", TransformName(route.variant), TacticName(route.tactic), RouteReasonName(route.reason));
}

void KernelRegistry::Add(const Tactic& tactic, Transform transform) {
  if (!Has(tactic, transform)) entries_.push_back({tactic, transform});
}

// Split count is a run-time parameter of every kernel, so instantiations are matched on the
// compile-time shape alone: CTA M/N/K.
static bool SameInstantiation(const Tactic& a, const Tactic& b) {
  return a.cta_m == b.cta_m && a.cta_n == b.cta_n && a.cta_k == b.cta_k;
}

bool KernelRegistry::Has(const Tactic& tactic, Transform transform) const {
  for (const Entry& entry : entries_) {
    if (entry.transform == transform && SameInstantiation(entry.tactic, tactic)) return true;
  }
  return false;
}

absl::Status KernelRegistry::CheckLaunchable(const Tactic& tactic, Transform transform) const {
  if (!Has(tactic, transform)) {
    return absl::InvalidArgumentError(
        fmt::format("no {} kernel is instantiated for tactic {}", TransformName(transform), TacticName(tactic)));
  }
  if (tactic.swizzle > max_swizzle_) {
    return absl::InvalidArgumentError(
        fmt::format("swizzle {} of tactic {} is beyond the kernels' 0..{}", tactic.swizzle, TacticName(tactic),
                    max_swizzle_));
  }
  return absl::OkStatus();
}

std::vector<Tactic> KernelRegistry::OrdinaryTactics() const {
  std::vector<Tactic> tactics;
  for (const Entry& entry : entries_) {
    if (entry.transform == Transform::kOrdinary) tactics.push_back(entry.tactic);
  }
  return tactics;
}

absl::StatusOr<Route> DecideRoute(const KernelRegistry& registry, const Tactic& ordinary_tactic,
                                  TransformRequest request, FallbackPolicy policy, bool layer_admitted,
                                  std::string_view refusal_detail) {
  MXDIFF_RETURN_IF_ERROR(ValidateTactic(ordinary_tactic));
  if (absl::Status status = registry.CheckLaunchable(ordinary_tactic, Transform::kOrdinary); !status.ok()) {
    return status;
  }
  Route route;
  route.tactic = ordinary_tactic;
  if (request == TransformRequest::kOrdinary) return route;

  if (!layer_admitted) {
    route.reason = RouteReason::kLayerRefused;
    route.detail = std::string(refusal_detail);
  } else if (!registry.Has(ordinary_tactic, Transform::kFolded)) {
    route.reason = RouteReason::kFoldedMissing;
    route.detail = fmt::format("no folded kernel is instantiated for tactic {}", TacticName(ordinary_tactic));
  } else {
    route.variant = Transform::kFolded;
    route.reason = RouteReason::kFoldedAdmitted;
    return route;
  }
  if (request == TransformRequest::kFolded && policy == FallbackPolicy::kFailClosed) {
    return absl::FailedPreconditionError(
        fmt::format("folded requested fail-closed, but {}: {}", RouteReasonName(route.reason), route.detail));
  }
  return route;
}

}  // namespace mxdiff
