// The merge verdict of `mxdiff gate` (issue 18) from the outcomes of its five steps: audit,
// transform proof, real weights, exactness on the real layer, speed. Fail-closed: MERGE only when
// every step ran and passed; any failure (a bit differs, a wrong fallback, the candidate slower)
// is DO-NOT-MERGE, whatever else could not run; a step that could not run, or a bench without a
// verdict, is INCONCLUSIVE. Pure and CUDA-free, so the rule is tested on the CPU.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/exit_status.h"
#include "tools/bench/verdict.h"

namespace mxdiff::gate {

enum class GateStep : uint8_t { kAudit = 0, kProof = 1, kRealWeights = 2, kExactness = 3, kSpeed = 4 };
inline constexpr int kGateSteps = 5;
std::string_view GateStepName(GateStep step);  // "audit", "proof", "real-weights", "exactness", "speed"

enum class StepOutcome : uint8_t {
  kPassed = 0,
  kFailed = 1,     // it ran and found a reason not to merge
  kSkipped = 2,    // it could not run (no GPU, a step before it failed to produce its input)
  kNoVerdict = 3,  // it ran and could not decide (the bench: too noisy, position effect, ...)
};
std::string_view StepOutcomeName(StepOutcome outcome);  // "passed", "failed", "skipped", "no-verdict"

struct StepResult {
  GateStep step = GateStep::kAudit;
  StepOutcome outcome = StepOutcome::kSkipped;
  std::string summary{};  // one line: what it found, or why it did not run
  std::string command{};  // the command that reproduces the step alone
  std::vector<std::string> details{};  // more lines for the report (per layer, per arm), not the verdict's reason
  double seconds = 0;                // how long the step took
};

// The speed step's outcome from the bench's verdict on the candidate (B) against the baseline (A).
StepOutcome SpeedOutcome(bench::Verdict verdict);

enum class GateVerdict : uint8_t { kMerge = 0, kDoNotMerge = 1, kInconclusive = 2 };
std::string_view GateVerdictName(GateVerdict verdict);  // "MERGE", "DO-NOT-MERGE", "INCONCLUSIVE"

struct GateDecision {
  GateVerdict verdict = GateVerdict::kInconclusive;
  std::string reason{};   // one line naming the steps that decided it
  int exit_status = kExitInconclusive;  // kExitOk MERGE, kExitCheckFailed DO-NOT-MERGE, kExitInconclusive (tools/README.md)
};

// A step given twice, or one not given at all, counts as not run.
GateDecision DecideGate(std::span<const StepResult> steps);

}  // namespace mxdiff::gate
