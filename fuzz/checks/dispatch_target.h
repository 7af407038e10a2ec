// fuzz_dispatch's property: DecideRoute over the case's kernel registry (some folded
// instantiations missing, sometimes the ordinary one too) against the rules of kernels/route.h:
// never a route to a kernel that does not exist (no launch), folded only when requested,
// admitted and mirrored on exactly the ordinary tactic, a fallback with its reason otherwise,
// and the fail-closed error exactly when an explicit folded request cannot be honoured.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "reference/admission.h"

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"

namespace mxdiff::fuzz {

// What the rules of kernels/route.h demand, derived independently of DecideRoute.
struct Expected {
  absl::StatusCode error = absl::StatusCode::kOk;
  Transform variant = Transform::kOrdinary;
  RouteReason reason = RouteReason::kOrdinaryRequested;
};

// One case's dispatch: the registry, the layer's admission, what the rules demand and what
// DecideRoute decided; the named checks read it.
struct DispatchRun {
  const FuzzCase& c;
  KernelRegistry registry;
  LayerAdmission admission;
  Expected expected;
  absl::StatusOr<Route> route;
  std::string situation;  // the case's dispatch in words, for the findings
};

DispatchRun DecideDispatch(const FuzzCase& fuzz_case);

// The named checks, each its own function, in the order they run: error (a failed route with the
// error the rules demand), launchable, tactic-mirrored, folded-admitted, folded-requested,
// fail-closed, expected-route, fallback-detail. All run and every finding is kept.
std::vector<std::string_view> DispatchCheckNames();
std::vector<Finding> DispatchFindings(const DispatchRun& run);
std::vector<Finding> DispatchFindings(const FuzzCase& fuzz_case);

}  // namespace mxdiff::fuzz
