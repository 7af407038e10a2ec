#include "fuzz/checks/dispatch_target.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/driver/coverage_counters.h"
#include "fuzz/driver/fuzz_target.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

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

// The route failed: with the error the rules demand.
CheckResult CheckError(const DispatchRun& run) {
  if (run.route.ok() || run.expected.error == run.route.status().code()) return std::nullopt;
  const Expected& expected = run.expected;
  return Finding{expected.error == absl::StatusCode::kOk
                     ? fmt::format("route/error-instead-of-{}", RouteReasonName(expected.reason))
                     : fmt::format("route/wrong-error/{}", absl::StatusCodeToString(expected.error)),
                 fmt::format("DecideRoute failed with {}; expected {}. {}", run.route.status().ToString(),
                             expected.error == absl::StatusCode::kOk
                                 ? fmt::format("a {} route", TransformName(expected.variant))
                                 : absl::StatusCodeToString(expected.error),
                             run.situation)};
}

CheckResult CheckLaunchable(const DispatchRun& run) {
  if (!run.route.ok() || run.registry.Has(run.route->tactic, run.route->variant)) return std::nullopt;
  const Route& route = *run.route;
  return Finding{fmt::format("no-launch/{}/{}", TransformName(route.variant), RouteReasonName(route.reason)),
                 fmt::format("route {} ({}) names a kernel the registry lacks: nothing would launch. {}",
                             TransformName(route.variant), RouteReasonName(route.reason), run.situation)};
}

CheckResult CheckTacticMirrored(const DispatchRun& run) {
  if (!run.route.ok() || run.route->tactic == run.c.tactic) return std::nullopt;
  return Finding{"route/tactic-not-mirrored",
                 fmt::format("route runs tactic {}, the ordinary tactic is {}. {}", TacticName(run.route->tactic),
                             TacticName(run.c.tactic), run.situation)};
}

CheckResult CheckFoldedAdmitted(const DispatchRun& run) {
  if (!run.route.ok() || run.route->variant != Transform::kFolded || run.admission.admitted) return std::nullopt;
  return Finding{"route/folded-on-refused", fmt::format("{}. {}", run.admission.Describe(), run.situation)};
}

CheckResult CheckFoldedRequested(const DispatchRun& run) {
  if (!run.route.ok() || run.route->variant != Transform::kFolded || run.c.request != TransformRequest::kOrdinary) {
    return std::nullopt;
  }
  return Finding{"route/folded-not-requested", run.situation};
}

CheckResult CheckFailClosed(const DispatchRun& run) {
  if (!run.route.ok() || run.expected.error == absl::StatusCode::kOk) return std::nullopt;
  const Route& route = *run.route;
  return Finding{fmt::format("route/fail-closed-ignored/{}", RouteReasonName(route.reason)),
                 fmt::format("expected {}, got a {} route ({}). {}", absl::StatusCodeToString(run.expected.error),
                             TransformName(route.variant), RouteReasonName(route.reason), run.situation)};
}

// The route the rules demand (where they demand one: fail-closed covers an expected error).
CheckResult CheckExpectedRoute(const DispatchRun& run) {
  if (!run.route.ok() || run.expected.error != absl::StatusCode::kOk) return std::nullopt;
  const Route& route = *run.route;
  const Expected& expected = run.expected;
  if (route.variant == expected.variant && route.reason == expected.reason) return std::nullopt;
  return Finding{fmt::format("route/{}-instead-of-{}", RouteReasonName(route.reason), RouteReasonName(expected.reason)),
                 fmt::format("route {} ({}), expected {} ({}). {}", TransformName(route.variant),
                             RouteReasonName(route.reason), TransformName(expected.variant),
                             RouteReasonName(expected.reason), run.situation)};
}

CheckResult CheckFallbackDetail(const DispatchRun& run) {
  if (!run.route.ok()) return std::nullopt;
  const Route& route = *run.route;
  if (route.reason == RouteReason::kOrdinaryRequested || route.reason == RouteReason::kFoldedAdmitted ||
      !route.detail.empty()) {
    return std::nullopt;
  }
  return Finding{"route/fallback-without-detail",
                 fmt::format("a {} fallback must say why (empty detail). {}", RouteReasonName(route.reason),
                             run.situation)};
}

constexpr NamedCheck<DispatchRun> kDispatchChecks[] = {
    {"error", CheckError},
    {"launchable", CheckLaunchable},
    {"tactic-mirrored", CheckTacticMirrored},
    {"folded-admitted", CheckFoldedAdmitted},
    {"folded-requested", CheckFoldedRequested},
    {"fail-closed", CheckFailClosed},
    {"expected-route", CheckExpectedRoute},
    {"fallback-detail", CheckFallbackDetail},
};

}  // namespace

DispatchRun DecideDispatch(const FuzzCase& c) {
  KernelRegistry registry = c.Registry();
  LayerAdmission admission = AdmitLayer(c.scale_bytes);
  for (uint8_t raw : c.scale_bytes) CountScaleClass(raw);
  const Expected expected = ExpectedRoute(c, registry, admission.admitted);
  absl::StatusOr<Route> route =
      DecideRoute(registry, c.tactic, c.request, c.policy, admission.admitted, admission.Describe());
  if (route.ok()) {
    CountRoute(*route);
  } else {
    CountRouteError(c.request, c.policy, route.status().code());
  }
  std::string situation = Situation(c, registry, admission);
  return DispatchRun{.c = c, .registry = std::move(registry), .admission = std::move(admission),
                     .expected = expected, .route = std::move(route), .situation = std::move(situation)};
}

std::vector<std::string_view> DispatchCheckNames() { return CheckNamesOf(kDispatchChecks); }

std::vector<Finding> DispatchFindings(const DispatchRun& run) {
  return RunNamedChecks<DispatchRun>(kDispatchChecks, run);
}

std::vector<Finding> DispatchFindings(const FuzzCase& c) { return DispatchFindings(DecideDispatch(c)); }

}  // namespace mxdiff::fuzz
