// The gate's report (`--report=DIR`): report.json (schema "mxdiff-gate/1") and report.md, written
// only once the gate has decided, each through a temporary file renamed into place, so that no
// file in DIR looks like a verdict of a gate that did not finish. DIR may hold the user's own
// files: the gate replaces only what a gate wrote, recognised by its mark, and refuses to start
// where a file it would write is someone else's.
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

// The marks of the gate's own files: report.json's "schema", the last line of report.md, and the
// "written_by" that the gate adds to bench.json (mxdiff bench's JSON of the speed step).
inline constexpr std::string_view kGateMarkdownMark = "<!-- written by mxdiff gate (mxdiff-gate/1) -->";
inline constexpr std::string_view kGateWrittenByKey = "written_by";

// The files the gate writes in the report folder (the figures only where drawn, bench.json only
// where the speed step timed something).
inline constexpr std::string_view kGateReportFiles[] = {"report.json", "report.md", "bench.json",
                                                       "audit_histograms.png", "bench_rounds.png"};

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

// mxdiff bench's JSON of `json` (bench::ReportJson) with the gate's mark added.
std::string MarkGateBenchJson(const std::string& json);

// Bad input (one line) where DIR holds, at a name of kGateReportFiles, a file no gate wrote: a
// report.json without the gate's schema, a report.md or bench.json without the gate's mark, a
// figure an earlier gate's report.json does not list. Nothing is read but those files.
absl::Status CheckReportFolder(const std::string& dir);

// Removes an earlier gate's files from DIR, each only where it carries the gate's mark (a figure
// where the earlier report.json lists it). The gate calls it once it has decided, before it
// writes its own, so that no figure or bench.json of another run stands beside its verdict.
void RemoveEarlierReport(const std::string& dir);

}  // namespace mxdiff::gate
