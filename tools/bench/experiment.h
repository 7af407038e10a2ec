// One paired comparison of two timed arms: rounds in a schedule (A B B A or B A A B), a clock
// reading around every round (a throttled round is kept in the samples, flagged, and left out
// of the statistics), the stopping rule after each round, then per-arm summaries and the
// bootstrap interval of the per-round difference B - A. CUDA-free: the arms are an interface
// (graph replays on a GPU, fakes in the unit tests).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/schedule.h"
#include "tools/bench/stats.h"
#include "tools/bench/stopping.h"
#include "tools/bench/throttle.h"

namespace mxdiff::bench {

struct ReplayTime {
  double per_call_us = 0;  // the replay's time over its calls
  double replay_us = 0;
  int calls = 0;
};

class TimedArm {
 public:
  virtual ~TimedArm() = default;
  // One timed replay (a graph launch between two device events, or a batch of host calls).
  virtual absl::StatusOr<ReplayTime> TimeReplay() = 0;
};

struct Sample {
  int round = 0;
  int slot = 0;  // 0..3 in the round
  int arm = 0;   // 0 = A, 1 = B
  ReplayTime time;
  ClockReading clocks;   // read after the round; reasons: both readings of the round OR-ed
  bool discarded = false;  // throttled round
};

struct ExperimentConfig {
  Pattern pattern = Pattern::kAbba;
  StoppingRule stopping;
  int check_resamples = 2000;  // bootstrap during the run (stopping checks)
  int resamples = 10000;       // the final interval
  double confidence = 0.95;
  uint64_t seed = 1;           // of the bootstrap
  uint64_t throttle_mask = kThrottleMask;
};

struct RoundResult {
  int round = 0;
  double a_us = 0;  // mean of A's two slots
  double b_us = 0;
  double difference_us = 0;  // b_us - a_us
};

struct Analysis {
  Summary a;  // per-call microseconds of the kept samples
  Summary b;
  std::vector<RoundResult> rounds;  // kept rounds only
  BootstrapResult difference;           // microseconds, B - A
  double relative = 0;                  // difference / median of A
  Interval relative_ci;
  Direction direction = Direction::kUnresolved;
};

struct ExperimentResult {
  std::vector<Sample> samples;  // every replay, discarded ones too
  int rounds_run = 0;
  int rounds_discarded = 0;
  StopReason stop = StopReason::kContinue;
  double seconds = 0;
  absl::Status analysis_status;  // not OK: too few kept rounds, `analysis` is empty
  Analysis analysis;
};

// Pure: the analysis of `samples` (kept ones), for `pattern`. FailedPrecondition with fewer
// than two kept rounds.
absl::StatusOr<Analysis> Analyze(const std::vector<Sample>& samples, Pattern pattern, int resamples,
                                 double confidence, uint64_t seed);

// Runs rounds until the stopping rule ends them. `monitor` may be null (no clock readings:
// nothing is discarded). `now_seconds` is the clock of the budget. An arm's error ends the run
// with that error, naming the round and slot; too few kept rounds is analysis_status.
absl::StatusOr<ExperimentResult> RunExperiment(TimedArm& a, TimedArm& b, ClockMonitor* monitor,
                                               const ExperimentConfig& config,
                                               const std::function<double()>& now_seconds);

}  // namespace mxdiff::bench
