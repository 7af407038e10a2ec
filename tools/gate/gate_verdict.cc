#include "tools/gate/gate_verdict.h"

#include <array>
#include <vector>

#include "fmt/format.h"

namespace mxdiff::gate {

std::string_view GateStepName(GateStep step) {
  static constexpr std::array<std::string_view, kGateSteps> kNames = {"audit", "proof", "real-weights", "exactness",
                                                                      "speed"};
  return kNames[size_t(step)];
}

std::string_view StepOutcomeName(StepOutcome outcome) {
  static constexpr std::array<std::string_view, 4> kNames = {"passed", "failed", "skipped", "no-verdict"};
  return kNames[size_t(outcome)];
}

std::string_view GateVerdictName(GateVerdict verdict) {
  static constexpr std::array<std::string_view, 3> kNames = {"MERGE", "DO-NOT-MERGE", "INCONCLUSIVE"};
  return kNames[size_t(verdict)];
}

StepOutcome SpeedOutcome(bench::Verdict verdict) {
  switch (verdict) {
    case bench::Verdict::kFaster:
      return StepOutcome::kPassed;
    case bench::Verdict::kSlower:
    case bench::Verdict::kBitMismatch:
      return StepOutcome::kFailed;
    case bench::Verdict::kUnresolved:
    case bench::Verdict::kTooNoisy:
    case bench::Verdict::kPositionEffect:
    case bench::Verdict::kIncomplete:
      break;
  }
  return StepOutcome::kNoVerdict;
}

GateDecision DecideGate(std::span<const StepResult> steps) {
  std::array<int, kGateSteps> given{};
  for (const StepResult& result : steps) ++given[size_t(result.step)];
  std::vector<std::string> failed, undecided;
  for (const StepResult& result : steps) {
    const std::string_view name = GateStepName(result.step);
    if (given[size_t(result.step)] != 1) continue;
    if (result.outcome == StepOutcome::kFailed) failed.push_back(fmt::format("{} ({})", name, result.summary));
    if (result.outcome == StepOutcome::kSkipped || result.outcome == StepOutcome::kNoVerdict) {
      undecided.push_back(fmt::format("{} {} ({})", name, StepOutcomeName(result.outcome), result.summary));
    }
  }
  for (int step = 0; step < kGateSteps; ++step) {
    if (given[step] == 0) undecided.push_back(fmt::format("{} not run", GateStepName(GateStep(step))));
    if (given[step] > 1) undecided.push_back(fmt::format("{} given {} times", GateStepName(GateStep(step)), given[step]));
  }
  if (!failed.empty()) {
    return {GateVerdict::kDoNotMerge, fmt::format("failed: {}", fmt::join(failed, "; ")), kExitCheckFailed};
  }
  if (!undecided.empty()) {
    return {GateVerdict::kInconclusive, fmt::format("not decided: {}", fmt::join(undecided, "; ")), kExitInconclusive};
  }
  return {GateVerdict::kMerge, "every step ran and passed", kExitOk};
}

}  // namespace mxdiff::gate
