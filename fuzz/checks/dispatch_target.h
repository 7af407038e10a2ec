// fuzz_dispatch's property: DecideRoute over the case's kernel registry (some folded
// instantiations missing, sometimes the ordinary one too) against the rules of kernels/route.h:
// never a route to a kernel that does not exist (no launch), folded only when requested,
// admitted and mirrored on exactly the ordinary tactic, a fallback with its reason otherwise,
// and the fail-closed error exactly when an explicit folded request cannot be honoured.
#pragma once

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"

namespace mxdiff::fuzz {

CheckResult CheckDispatchCase(const FuzzCase& fuzz_case);

}  // namespace mxdiff::fuzz
