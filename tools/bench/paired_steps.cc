#include "tools/bench/paired_steps.h"

#include <chrono>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "tools/bench/bit_compare.h"

namespace mxdiff::bench {

ExperimentReport PairedReport(Protocol protocol, Pattern pattern, uint64_t seed, const ArmSpec& sa, const ArmSpec& sb) {
  ExperimentReport e;
  e.protocol = protocol;
  e.pattern = pattern;
  e.seed = seed;
  e.a.label = sa.Label();
  e.b.label = protocol == Protocol::kSameArm ? sb.Label() + "'" : sb.Label();
  return e;
}

bool CheckBitsBeforeTiming(ExperimentReport& e, BenchArm& a, BenchArm& b, int sets, int n, std::string_view unit,
                           std::string_view what) {
  e.bits_equal = true;
  for (int s = 0; s < sets && e.bits_equal; ++s) {
    absl::StatusOr<std::vector<uint16_t>> ra = a.RunSet(s);
    absl::StatusOr<std::vector<uint16_t>> rb = ra.ok() ? b.RunSet(s) : ra.status();
    if (!rb.ok()) {
      e.error = std::string(rb.status().message());
      return false;
    }
    if (std::string difference = DescribeBitDifference(*ra, *rb, n); !difference.empty()) {
      e.bits_equal = false;
      e.bits_detail = fmt::format("{} {}: {}", unit, s, difference);
    }
  }
  e.bits_checked = true;
  e.a.route = a.route();
  e.b.route = b.route();
  if (!e.bits_equal) {
    e.error = fmt::format("{} differ: not timed (no speed claim comes with a bit change)", what);
    return false;
  }
  return true;
}

bool WarmUpAndPrepare(ExperimentReport& e, BenchArm& a, BenchArm& b, int warmup_passes, int capture_mode, bool b_first) {
  BenchArm* order[2] = {&a, &b};
  if (b_first) std::swap(order[0], order[1]);
  for (BenchArm* arm : order) {
    absl::Status status = arm->WarmUp(warmup_passes);
    if (status.ok()) status = arm->PrepareTiming(capture_mode, /*launch_once=*/true);
    if (!status.ok()) {
      e.error = std::string(status.message());
      return false;
    }
  }
  return true;
}

void TimePair(ExperimentReport& e, BenchArm& a, BenchArm& b, ClockMonitor* monitor, const ExperimentConfig& timing) {
  const auto now = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  absl::StatusOr<ExperimentResult> result = RunExperiment(a, b, monitor, timing, now);
  if (!result.ok()) {
    e.error = std::string(result.status().message());
    return;
  }
  e.result = *std::move(result);
}

void CheckLastOutputs(ExperimentReport& e, BenchArm& a, BenchArm& b, int n, std::string_view unit,
                      std::string_view what, bool check_unwritten, bool is_error) {
  if (a.last_set() != b.last_set()) return;
  absl::StatusOr<std::vector<uint16_t>> la = a.LastOutput();
  absl::StatusOr<std::vector<uint16_t>> lb = la.ok() ? b.LastOutput() : la.status();
  if (!lb.ok()) {
    e.error = std::string(lb.status().message());
    return;
  }
  e.bits_checked = true;
  std::string difference = DescribeBitDifference(*la, *lb, n);
  if (difference.empty() && check_unwritten) difference = DescribeUnwritten(*la, n);
  if (difference.empty()) return;
  e.bits_equal = false;
  e.bits_detail = fmt::format("after timing, {} {}: {}", unit, a.last_set(), difference);
  if (is_error) e.error = fmt::format("{} differ after timing: no speed claim", what);
}

std::string TimedSummary(std::string_view name, const ExperimentReport& e) {
  return fmt::format("{}: {} {}: {} rounds ({} throttled), stop {}, {:.1f} s{}", name, ProtocolName(e.protocol),
                     PatternName(e.pattern), e.result.rounds_run, e.result.rounds_discarded,
                     StopReasonName(e.result.stop), e.result.seconds,
                     e.has_analysis() ? fmt::format(", B-A {:+.3f} us [{:+.3f}, {:+.3f}]",
                                                    e.result.analysis.difference.estimate,
                                                    e.result.analysis.difference.ci.low,
                                                    e.result.analysis.difference.ci.high)
                                      : std::string());
}

}  // namespace mxdiff::bench
