// The noise-based stopping rule (NVBench's idea): keep sampling rounds until the bootstrap
// interval of the difference is narrow relative to arm A's median, or the time budget or the
// round limit ends. CUDA-free and pure, so that the decision is unit-tested.
#pragma once

#include <optional>
#include <string_view>

namespace mxdiff::bench {

struct StoppingRule {
  double target_relative_half_width = 0.002;  // CI half-width / median of A
  int min_rounds = 30;                        // kept rounds before precision may stop the run
  int max_rounds = 100000;                    // rounds run, kept or discarded
  double budget_seconds = 10;
  int check_every = 10;                       // kept rounds between two interval checks
};

enum class StopReason : uint8_t { kContinue = 0, kPrecise = 1, kBudget = 2, kMaxRounds = 3 };
std::string_view StopReasonName(StopReason reason);  // "continue", "precise", "budget", "max-rounds"

// Whether to compute the interval after this round: enough kept rounds, and check_every kept
// rounds since the last check (`last_checked_kept`; 0 before the first).
bool ShouldCheck(const StoppingRule& rule, int kept_rounds, int last_checked_kept);

// After a round. `relative_half_width` is set only when the interval was computed after this
// round. Budget first (a run never overstays it), then the round limit, then precision (only
// with at least min_rounds kept).
StopReason Decide(const StoppingRule& rule, int kept_rounds, int rounds_run, double elapsed_seconds,
                  std::optional<double> relative_half_width);

}  // namespace mxdiff::bench
