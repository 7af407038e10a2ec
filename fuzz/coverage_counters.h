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
// Five classes of FACTS.md §3-4: a = 0 (flushed), 1..16 (admitted), 17 (folded Inf),
// 18..29 (folded sign spill), 30 (saturated, the NaN byte included).
void CountScaleClass(uint8_t raw);
// Split-plan shape: one split, several, clamped request, partial last chunk.
void CountPlan(int k, int cta_k, int requested_splits);

}  // namespace mxdiff::fuzz
