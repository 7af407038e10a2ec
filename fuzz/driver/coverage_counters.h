// Extra coverage for libFuzzer (`__libfuzzer_extra_counters`): the route taken, the fallback
// reason and the scale-byte transform class are data, not code paths, so edge coverage alone
// cannot tell a case that reaches a new route from one that does not. Compiled to no-ops
// outside libFuzzer builds (MXDIFF_LIBFUZZER_COUNTERS unset).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/route.h"

namespace mxdiff::fuzz {

void CountRoute(const Route& route);
void CountRouteError(TransformRequest request, FallbackPolicy policy, absl::StatusCode code);
// The classes of reference/scale_class.h.
void CountScaleClass(uint8_t raw);
// Split-plan shape: one split, several, clamped request, partial last chunk.
void CountPlan(int k, int cta_k, int requested_splits);

}  // namespace mxdiff::fuzz
