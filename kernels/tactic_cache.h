// Measured ordinary tactics, keyed by device and shape: the "reuse" half of dispatch (the
// tuner measures, the table is the default). Thread-safe. Host-only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kernels/dispatch_table.h"

namespace mxdiff {

class TacticCache {
 public:
  std::optional<Tactic> Find(const std::string& device, const DispatchShape& shape) const;
  void Store(const std::string& device, const DispatchShape& shape, const Tactic& tactic);
  size_t size() const;

 private:
  struct Entry {
    std::string device;
    DispatchShape shape;
    Tactic tactic;
  };
  mutable absl::Mutex mutex_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mutex_);
};

// The fastest candidate by `seconds` (ties: the earlier one). `measure` returns the time of
// one call or an error, which aborts tuning.
template <typename Measure>
absl::StatusOr<Tactic> FastestTactic(const std::vector<Tactic>& candidates, Measure&& measure) {
  if (candidates.empty()) return absl::InvalidArgumentError("no candidate tactics to measure");
  std::optional<Tactic> best;
  double best_seconds = 0;
  for (const Tactic& candidate : candidates) {
    absl::StatusOr<double> seconds = measure(candidate);
    if (!seconds.ok()) return seconds.status();
    if (!best || *seconds < best_seconds) {
      best = candidate;
      best_seconds = *seconds;
    }
  }
  return *best;
}

}  // namespace mxdiff
