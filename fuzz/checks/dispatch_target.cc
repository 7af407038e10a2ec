#include "fuzz/checks/dispatch_target.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/driver/coverage_counters.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

// What the rules of kernels/route.h demand, derived independently of DecideRoute.
struct Expected {
  absl::StatusCode error = absl::StatusCode::kOk;
  Transform variant = Transform::kOrdinary;
  RouteReason reason = RouteReason::kOrdinaryRequested;
};

Expected ExpectedRoute(const FuzzCase& c, const KernelRegistry& registry, bool admitted) {
  Expected expected;
  if (!ValidateTactic(c.tactic).ok() || !registry.Has(c.tactic, Transform::kOrdinary)) {
    expected.error = absl::StatusCode::kInvalidArgument;
    return expected;
  }
  if (c.request == TransformRequest::kOrdinary) return expected;
  if (!admitted) {
    expected.reason = RouteReason::kLayerRefused;
  } else if (!registry.Has(c.tactic, Transform::kFolded)) {
    expected.reason = RouteReason::kFoldedMissing;
  } else {
    expected.variant = Transform::kFolded;
    expected.reason = RouteReason::kFoldedAdmitted;
    return expected;
  }
  if (c.request == TransformRequest::kFolded && c.policy == FallbackPolicy::kFailClosed) {
    expected.error = absl::StatusCode::kFailedPrecondition;
  }
  return expected;
}

std::string Situation(const FuzzCase& c, const KernelRegistry& registry, const LayerAdmission& admission) {
  return fmt::format("tactic {}, request {}, policy {}, layer {}, ordinary kernel {}, folded kernel {}",
                     TacticName(c.tactic), TransformRequestName(c.request), FallbackPolicyName(c.policy),
                     admission.admitted ? "admitted" : "refused",
                     registry.Has(c.tactic, Transform::kOrdinary) ? "present" : "missing",
                     registry.Has(c.tactic, Transform::kFolded) ? "present" : "missing");
}

}  // namespace

CheckResult CheckDispatchCase(const FuzzCase& c) {
  const KernelRegistry registry = c.Registry();
  const LayerAdmission admission = AdmitLayer(c.scale_bytes);
  for (uint8_t raw : c.scale_bytes) CountScaleClass(raw);
  const Expected expected = ExpectedRoute(c, registry, admission.admitted);
  absl::StatusOr<Route> route =
      DecideRoute(registry, c.tactic, c.request, c.policy, admission.admitted, admission.Describe());

  if (!route.ok()) {
    CountRouteError(c.request, c.policy, route.status().code());
    if (expected.error == route.status().code()) return std::nullopt;
    return Finding{expected.error == absl::StatusCode::kOk
                       ? fmt::format("route/error-instead-of-{}", RouteReasonName(expected.reason))
                       : fmt::format("route/wrong-error/{}", absl::StatusCodeToString(expected.error)),
                   fmt::format("DecideRoute failed with {}; expected {}. {}", route.status().ToString(),
                               expected.error == absl::StatusCode::kOk
                                   ? fmt::format("a {} route", TransformName(expected.variant))
                                   : absl::StatusCodeToString(expected.error),
                               Situation(c, registry, admission))};
  }
  CountRoute(*route);
  const std::string situation = Situation(c, registry, admission);
  if (!registry.Has(route->tactic, route->variant)) {
    return Finding{fmt::format("no-launch/{}/{}", TransformName(route->variant), RouteReasonName(route->reason)),
                   fmt::format("route {} ({}) names a kernel the registry lacks: nothing would launch. {}",
                               TransformName(route->variant), RouteReasonName(route->reason), situation)};
  }
  if (!(route->tactic == c.tactic)) {
    return Finding{"route/tactic-not-mirrored",
                   fmt::format("route runs tactic {}, the ordinary tactic is {}. {}", TacticName(route->tactic),
                               TacticName(c.tactic), situation)};
  }
  if (route->variant == Transform::kFolded && !admission.admitted) {
    return Finding{"route/folded-on-refused", fmt::format("{}. {}", admission.Describe(), situation)};
  }
  if (route->variant == Transform::kFolded && c.request == TransformRequest::kOrdinary) {
    return Finding{"route/folded-not-requested", situation};
  }
  if (expected.error != absl::StatusCode::kOk) {
    return Finding{fmt::format("route/fail-closed-ignored/{}", RouteReasonName(route->reason)),
                   fmt::format("expected {}, got a {} route ({}). {}", absl::StatusCodeToString(expected.error),
                               TransformName(route->variant), RouteReasonName(route->reason), situation)};
  }
  if (route->variant != expected.variant || route->reason != expected.reason) {
    return Finding{fmt::format("route/{}-instead-of-{}", RouteReasonName(route->reason),
                               RouteReasonName(expected.reason)),
                   fmt::format("route {} ({}), expected {} ({}). {}", TransformName(route->variant),
                               RouteReasonName(route->reason), TransformName(expected.variant),
                               RouteReasonName(expected.reason), situation)};
  }
  if (route->reason != RouteReason::kOrdinaryRequested && route->reason != RouteReason::kFoldedAdmitted &&
      route->detail.empty()) {
    return Finding{"route/fallback-without-detail",
                   fmt::format("a {} fallback must say why (empty detail). {}", RouteReasonName(route->reason),
                               situation)};
  }
  return std::nullopt;
}

}  // namespace mxdiff::fuzz
