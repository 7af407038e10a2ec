#include "tools/bench/experiment.h"

#include <array>
#include <map>

#include "fmt/format.h"

namespace mxdiff::bench {

absl::StatusOr<Analysis> Analyze(const std::vector<Sample>& samples, Pattern pattern, int resamples,
                                 double confidence, uint64_t seed) {
  Analysis analysis;
  std::vector<double> a_times;
  std::vector<double> b_times;
  std::map<int, std::array<double, kSlotsPerRound>> rounds;
  std::map<int, int> filled;
  for (const Sample& sample : samples) {
    if (sample.discarded) continue;
    (sample.arm == 0 ? a_times : b_times).push_back(sample.time.per_call_us);
    rounds[sample.round][sample.slot] = sample.time.per_call_us;
    ++filled[sample.round];
  }
  const std::array<int, kSlotsPerRound> slots = Slots(pattern);
  std::vector<double> differences;
  for (const auto& [round, times] : rounds) {
    if (filled[round] != kSlotsPerRound) continue;  // a round cut short by an error
    RoundResult difference;
    difference.round = round;
    difference.difference_us = RoundDifference(pattern, times);
    for (int slot = 0; slot < kSlotsPerRound; ++slot) (slots[slot] == 0 ? difference.a_us : difference.b_us) += times[slot] / 2;
    analysis.rounds.push_back(difference);
    differences.push_back(difference.difference_us);
  }
  if (differences.size() < 2) {
    return absl::FailedPreconditionError(
        fmt::format("{} complete unthrottled rounds: at least 2 are needed for an interval", differences.size()));
  }
  analysis.a = Summarize(std::move(a_times));
  analysis.b = Summarize(std::move(b_times));
  analysis.difference = BootstrapMedian(differences, resamples, confidence, seed);
  analysis.relative = analysis.difference.estimate / analysis.a.median;
  analysis.relative_ci = Interval{analysis.difference.ci.low / analysis.a.median,
                                  analysis.difference.ci.high / analysis.a.median};
  analysis.direction = DirectionOf(analysis.difference.ci);
  return analysis;
}

absl::StatusOr<ExperimentResult> RunExperiment(TimedArm& a, TimedArm& b, ClockMonitor* monitor,
                                               const ExperimentConfig& config,
                                               const std::function<double()>& now_seconds) {
  ExperimentResult result;
  const double start = now_seconds();
  const std::array<int, kSlotsPerRound> slots = Slots(config.pattern);
  int kept = 0;
  int last_checked = 0;
  while (result.stop == StopReason::kContinue) {
    const int round = result.rounds_run;
    const ClockReading before = monitor != nullptr ? monitor->Read() : ClockReading{};
    const size_t first = result.samples.size();
    for (int slot = 0; slot < kSlotsPerRound; ++slot) {
      TimedArm& arm = slots[slot] == 0 ? a : b;
      absl::StatusOr<ReplayTime> time = arm.TimeReplay();
      if (!time.ok()) {
        return absl::Status(time.status().code(), fmt::format("round {} slot {} (arm {}): {}", round, slot,
                                                              slots[slot] == 0 ? 'A' : 'B', std::string(time.status().message())));
      }
      Sample sample;
      sample.round = round;
      sample.slot = slot;
      sample.arm = slots[slot];
      sample.time = *time;
      result.samples.push_back(sample);
    }
    ClockReading after = monitor != nullptr ? monitor->Read() : ClockReading{};
    after.reasons |= before.reasons;
    const bool throttled = IsThrottled(after.reasons, config.throttle_mask);
    for (size_t i = first; i < result.samples.size(); ++i) {
      result.samples[i].clocks = after;
      result.samples[i].discarded = throttled;
    }
    ++result.rounds_run;
    if (throttled) {
      ++result.rounds_discarded;
    } else {
      ++kept;
    }
    std::optional<double> relative_half_width;
    if (ShouldCheck(config.stopping, kept, last_checked)) {
      last_checked = kept;
      absl::StatusOr<Analysis> check =
          Analyze(result.samples, config.pattern, config.check_resamples, config.confidence, config.seed);
      if (check.ok()) relative_half_width = check->difference.ci.half_width() / check->a.median;
    }
    result.stop = Decide(config.stopping, kept, result.rounds_run, now_seconds() - start, relative_half_width);
  }
  result.seconds = now_seconds() - start;
  absl::StatusOr<Analysis> analysis =
      Analyze(result.samples, config.pattern, config.resamples, config.confidence, config.seed);
  if (analysis.ok()) {
    result.analysis = *std::move(analysis);
  } else {
    result.analysis_status = analysis.status();
  }
  return result;
}

}  // namespace mxdiff::bench
