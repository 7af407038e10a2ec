#include "fuzz/fuzz_rules.h"

#include "fmt/format.h"

namespace mxdiff::fuzz {

bool SameRoute(const Route& a, const Route& b) {
  return a.variant == b.variant && a.reason == b.reason && a.tactic == b.tactic;
}

std::string RouteText(const Route& route) {
  return fmt::format("{} ({}) tactic {}", TransformName(route.variant), RouteReasonName(route.reason),
                     TacticName(route.tactic));
}

Tactic PickBuiltTactic(const Tactic& tactic, std::span<const Tactic> built) {
  if (built.empty()) return tactic;
  Tactic mapped = built[size_t(tactic.cta_m + tactic.cta_n + tactic.cta_k) % built.size()];
  mapped.splits = tactic.splits;
  mapped.swizzle = tactic.swizzle;
  return mapped;
}

}  // namespace mxdiff::fuzz
