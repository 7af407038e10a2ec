// The gate's report (`--report=DIR`): report.json (schema "mxdiff-gate/1") and report.md, written
// only once the gate has decided, each through a temporary file renamed into place, so that no
// file in DIR looks like a verdict of a gate that did not finish.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tools/gate/gate_speed.h"
#include "tools/gate/gate_verdict.h"

namespace mxdiff::gate {

inline constexpr std::string_view kGateReportSchema = "mxdiff-gate/1";

struct GateReport {
  std::string checkpoint{};
  std::string tool_commit{};
  std::string admission_rule{};  // AdmissionRuleVersion() of the build that ran
  std::string gpu{};             // name, or empty where none
  std::string driver{};
  std::vector<std::pair<std::string, uint64_t>> seeds{};  // what each seed fed, and its value
  std::vector<StepResult> steps{};
  std::vector<std::string> notes{};    // lines after the steps (the model's figures, the accuracy run)
  std::vector<std::string> figures{};  // PNG file names in the report folder ("" none: notes say why)
  GateDecision decision{};
  // Step 5 (report.json "speed"): each measurement's sound and naive figures, the model's us per
  // token, and the bench's own JSON beside the report (every round of both arms, every protocol).
  std::vector<SpeedMeasurement> speed{};
  std::optional<PerToken> per_token{};
  std::string bench_json{};  // "bench.json" where written, else ""
};

std::string GateReportJson(const GateReport& report);
std::string GateReportMarkdown(const GateReport& report);

// DIR must be an existing folder.
absl::Status WriteGateReport(const std::string& dir, const GateReport& report);

}  // namespace mxdiff::gate
