#include "tools/bench/stopping.h"

#include <algorithm>

namespace mxdiff::bench {

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kContinue:
      return "continue";
    case StopReason::kPrecise:
      return "precise";
    case StopReason::kBudget:
      return "budget";
    case StopReason::kMaxRounds:
      return "max-rounds";
  }
  return "?";
}

bool ShouldCheck(const StoppingRule& rule, int kept_rounds, int last_checked_kept) {
  return kept_rounds >= std::max(rule.min_rounds, 2) && kept_rounds - last_checked_kept >= std::max(rule.check_every, 1);
}

StopReason Decide(const StoppingRule& rule, int kept_rounds, int rounds_run, double elapsed_seconds,
                  std::optional<double> relative_half_width) {
  if (elapsed_seconds >= rule.budget_seconds) return StopReason::kBudget;
  if (rounds_run >= rule.max_rounds) return StopReason::kMaxRounds;
  if (kept_rounds >= rule.min_rounds && relative_half_width &&
      *relative_half_width <= rule.target_relative_half_width) {
    return StopReason::kPrecise;
  }
  return StopReason::kContinue;
}

}  // namespace mxdiff::bench
