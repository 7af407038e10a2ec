#include "fuzz/mutators/fuzz_rules.h"

namespace mxdiff::fuzz {

Tactic PickBuiltTactic(const Tactic& tactic, std::span<const Tactic> built) {
  if (built.empty()) return tactic;
  Tactic mapped = built[size_t(tactic.cta_m + tactic.cta_n + tactic.cta_k) % built.size()];
  mapped.splits = tactic.splits;
  mapped.swizzle = tactic.swizzle;
  return mapped;
}

}  // namespace mxdiff::fuzz
