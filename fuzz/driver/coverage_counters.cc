#include "fuzz/driver/coverage_counters.h"

#include "reference/split_plan.h"
#include "reference/scale_class.h"

namespace mxdiff::fuzz {
namespace {

enum Slot : int {
  kRouteSlots = 0,                                 // variant x reason: 2 x 4
  kErrorSlots = kRouteSlots + 2 * kRouteReasonCount,  // request x policy x code bucket: 3 x 2 x 3
  kScaleSlots = kErrorSlots + 3 * 2 * 3,           // reference/scale_class.h
  kPlanSlots = kScaleSlots + kScaleClassCount,     // 4 plan shapes
  kSlotCount = kPlanSlots + 4,
};

#if defined(MXDIFF_LIBFUZZER_COUNTERS)
__attribute__((used, section("__libfuzzer_extra_counters"))) uint8_t extra_counters[kSlotCount];
void Hit(int slot) {
  if (extra_counters[slot] != 0xFF) ++extra_counters[slot];
}
#else
void Hit(int) {}
#endif

}  // namespace

void CountRoute(const Route& route) { Hit(kRouteSlots + int(route.variant) * kRouteReasonCount + int(route.reason)); }

void CountRouteError(TransformRequest request, FallbackPolicy policy, absl::StatusCode code) {
  const int bucket = code == absl::StatusCode::kInvalidArgument ? 0 : code == absl::StatusCode::kFailedPrecondition ? 1 : 2;
  Hit(kErrorSlots + (int(request) * 2 + int(policy)) * 3 + bucket);
}

void CountScaleClass(uint8_t raw) {
  Hit(kScaleSlots + int(ClassifyScale(raw)));
}

void CountPlan(int k, int cta_k, int requested_splits) {
  const int splits = effective_splits(k, cta_k, requested_splits);
  Hit(kPlanSlots + (splits == 1 ? 0 : 1));
  if (requested_splits > splits) Hit(kPlanSlots + 2);
  if (k % split_chunk_k(cta_k) != 0) Hit(kPlanSlots + 3);
}

}  // namespace mxdiff::fuzz
