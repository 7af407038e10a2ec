#include "tools/gate/gate_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "reference/status_macros.h"
#include "checkpoint/json_bytes.h"

namespace mxdiff::gate {
namespace {

absl::Status WriteByRename(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temporary = path.string() + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      std::filesystem::remove(temporary);
      return absl::UnavailableError(fmt::format("cannot write {}", temporary.string()));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::filesystem::remove(temporary);
    return absl::UnavailableError(fmt::format("cannot rename {} to {}: {}", temporary.string(), path.string(), why));
  }
  return absl::OkStatus();
}

}  // namespace

std::string GateReportJson(const GateReport& report) {
  nlohmann::ordered_json json;
  json["schema"] = kGateReportSchema;
  json["verdict"] = GateVerdictName(report.decision.verdict);
  json["reason"] = report.decision.reason;
  json["exit_status"] = report.decision.exit_status;
  json["checkpoint"] = report.checkpoint;
  json["tool_commit"] = report.tool_commit;
  json["admission_rule"] = report.admission_rule;
  json["gpu"] = report.gpu;
  json["driver"] = report.driver;
  json["seeds"] = nlohmann::ordered_json::object();
  for (const auto& [what, seed] : report.seeds) json["seeds"][what] = seed;
  json["steps"] = nlohmann::ordered_json::array();
  for (const StepResult& step : report.steps) {
    json["steps"].push_back({{"step", GateStepName(step.step)},
                             {"outcome", StepOutcomeName(step.outcome)},
                             {"summary", step.summary},
                             {"details", step.details},
                             {"command", step.command},
                             {"seconds", step.seconds}});
  }
  json["notes"] = report.notes;
  json["figures"] = report.figures;
  return cli::DumpJson(json, 2) + "\n";
}

std::string GateReportMarkdown(const GateReport& report) {
  std::string text = fmt::format("# mxdiff gate: {}\n\n{}\n\n", GateVerdictName(report.decision.verdict),
                                 report.decision.reason);
  text += fmt::format("- checkpoint: `{}`\n- tool commit: {}\n- admission rule: {}\n- GPU: {}\n", report.checkpoint,
                      report.tool_commit, report.admission_rule,
                      report.gpu.empty() ? "none" : fmt::format("{} (driver {})", report.gpu, report.driver));
  for (const auto& [what, seed] : report.seeds) text += fmt::format("- seed of {}: {}\n", what, seed);
  for (const StepResult& step : report.steps) {
    text += fmt::format("\n## {}: {} ({:.1f} s)\n\n{}\n", GateStepName(step.step), StepOutcomeName(step.outcome),
                        step.seconds, step.summary);
    for (const std::string& detail : step.details) text += fmt::format("- {}\n", detail);
    text += fmt::format("\n    {}\n", step.command);
  }
  if (!report.notes.empty()) text += "\n## notes\n\n";
  for (const std::string& note : report.notes) text += fmt::format("- {}\n", note);
  for (const std::string& figure : report.figures) text += fmt::format("\n![{}]({})\n", figure, figure);
  return text;
}

absl::Status WriteGateReport(const std::string& dir, const GateReport& report) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(fmt::format("--report={}: not an existing folder", dir));
  }
  MXDIFF_RETURN_IF_ERROR(WriteByRename(std::filesystem::path(dir) / "report.json", GateReportJson(report)));
  return WriteByRename(std::filesystem::path(dir) / "report.md", GateReportMarkdown(report));
}

}  // namespace mxdiff::gate
