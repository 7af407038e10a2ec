// The steps every paired protocol (`mxdiff bench` on GEMM sets and on a MoE layer) takes around
// its timing, written once: the first uses and bit check before anything is timed, the warm-up and
// capture in the experiment's order, and the summary line after. CUDA-free (over BenchArm).
#pragma once

#include <string>
#include <string_view>

#include "tools/bench/bench_arm.h"
#include "tools/bench/bench_spec.h"
#include "tools/bench/experiment.h"
#include "tools/bench/report.h"

namespace mxdiff::bench {

// A report of `protocol` with `pattern` and `seed`: A is sa's label, B sb's (primed, "X'", for
// the same-arm control).
ExperimentReport PairedReport(Protocol protocol, Pattern pattern, uint64_t seed, const ArmSpec& sa, const ArmSpec& sb);

// Runs each of the `sets` once on A then on B (every first use happens here) and compares the
// outputs (rows x `n`) bit for bit, stopping at the first difference; records both routes.
// `unit` names a set in the detail ("set", "routing"), `what` the outputs in the error
// ("outputs", "layer outputs"). False, with e.error set, when a run failed or the bits differ.
bool CheckBitsBeforeTiming(ExperimentReport& e, BenchArm& a, BenchArm& b, int sets, int n, std::string_view unit,
                           std::string_view what);

// Warms both arms up (`warmup_passes`) and prepares their timing (capture with `capture_mode`,
// one untimed replay), B first when `b_first`. False, with e.error set, on the first failure.
bool WarmUpAndPrepare(ExperimentReport& e, BenchArm& a, BenchArm& b, int warmup_passes, int capture_mode, bool b_first);

// Times A against B (RunExperiment over `timing`, the steady clock) into e.result, or e.error.
void TimePair(ExperimentReport& e, BenchArm& a, BenchArm& b, ClockMonitor* monitor, const ExperimentConfig& timing);

// After timing, where both arms' last calls ran the same set: compares their last outputs bit
// for bit (and, with `check_unwritten`, that A wrote every element). A difference sets the
// detail ("after timing, <unit> S: ...") and, with `is_error`, the error "<what> differ after
// timing: no speed claim".
void CheckLastOutputs(ExperimentReport& e, BenchArm& a, BenchArm& b, int n, std::string_view unit,
                      std::string_view what, bool check_unwritten, bool is_error);

// "<name>: <protocol> <pattern>: N rounds (M throttled), stop S, T s[, B-A d us [lo, hi]]".
std::string TimedSummary(std::string_view name, const ExperimentReport& e);

}  // namespace mxdiff::bench
