#include "tools/gate/gate_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

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

nlohmann::ordered_json FiguresJson(const ProtocolFigures& f) {
  return {{"a_us", f.a_us}, {"b_us", f.b_us}, {"difference_us", f.difference_us}, {"ci_low_us", f.ci_low_us},
          {"ci_high_us", f.ci_high_us}};
}

nlohmann::ordered_json MeasurementJson(const SpeedMeasurement& m) {
  nlohmann::ordered_json json{{"name", m.name},
                              {"kind", m.layer ? "layer" : "gemm"},
                              {"unit", m.layer ? "us per layer" : "us per call"},
                              {"candidate_runs", m.candidate_runs},
                              {"verdict", bench::VerdictName(m.report.error.empty() ? m.report.verdict.verdict
                                                                                    : bench::Verdict::kIncomplete)},
                              {"message", m.report.error.empty() ? m.report.verdict.message : m.report.error}};
  if (const auto sound = FiguresOf(m.report, bench::Protocol::kSound)) json["sound"] = FiguresJson(*sound);
  if (const auto naive = FiguresOf(m.report, bench::Protocol::kNaive)) {
    json["naive"] = FiguresJson(*naive);
    json["naive_answer"] = AnswerOf(*naive);
  }
  return json;
}

nlohmann::ordered_json SpeedJson(const GateReport& report) {
  nlohmann::ordered_json json{{"rule", kSpeedRule}, {"naive_first_use", "tune"}, {"bench_json", report.bench_json}};
  json["measurements"] = nlohmann::ordered_json::array();
  for (const SpeedMeasurement& m : report.speed) json["measurements"].push_back(MeasurementJson(m));
  if (const std::optional<PerToken>& t = report.per_token) {
    json["per_token"] = {{"measured_layers", t->measured_layers}, {"moe_layers", t->moe_layers},
                         {"sound", FiguresJson(t->sound)}, {"projection", FiguresJson(t->projection)}};
    if (t->naive) json["per_token"]["naive"] = FiguresJson(*t->naive);
    if (t->naive_projection) json["per_token"]["naive_projection"] = FiguresJson(*t->naive_projection);
  }
  return json;
}

// The speed measurements as a table: the sound figures and verdict, the naive ones beside them.
std::string SpeedTable(const GateReport& report) {
  if (report.speed.empty()) return "";
  auto figures = [](const std::optional<ProtocolFigures>& f) {
    return f ? fmt::format("{:.3f} | {:.3f} | {:+.3f} [{:+.3f}, {:+.3f}]", f->a_us, f->b_us, f->difference_us,
                           f->ci_low_us, f->ci_high_us)
             : std::string("- | - | -");
  };
  std::string text =
      "\n## speed: sound and naive protocols\n\n| measurement | unit | sound A | sound B | sound B-A [CI] | verdict | "
      "naive A | naive B | naive B-A [CI] | naive says |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const SpeedMeasurement& m : report.speed) {
    const std::optional<ProtocolFigures> naive = FiguresOf(m.report, bench::Protocol::kNaive);
    text += fmt::format("| {} | {} | {} | {} | {} | {} |\n", m.name, m.layer ? "us per layer" : "us per call",
                        figures(FiguresOf(m.report, bench::Protocol::kSound)),
                        bench::VerdictName(m.report.error.empty() ? m.report.verdict.verdict : bench::Verdict::kIncomplete),
                        figures(naive), naive ? AnswerOf(*naive) : "-");
  }
  if (!report.bench_json.empty()) text += fmt::format("\nEvery round of both arms: `{}`.\n", report.bench_json);
  return text;
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
  json["speed"] = SpeedJson(report);
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
  text += SpeedTable(report);
  if (!report.notes.empty()) text += "\n## notes\n\n";
  for (const std::string& note : report.notes) text += fmt::format("- {}\n", note);
  for (const std::string& figure : report.figures) text += fmt::format("\n![{}]({})\n", figure, figure);
  return text + fmt::format("\n{}\n", kGateMarkdownMark);
}

namespace {

// A report file larger than this is not one the gate wrote (bench.json of 43 layers is some MB).
constexpr uintmax_t kMaxGateFileBytes = uintmax_t(1) << 30;

// The text of `path` where it is a regular file of a size the gate writes; nullopt otherwise
// (missing, a folder, a FIFO: never opened).
std::optional<std::string> ReadIfRegular(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return std::nullopt;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size > kMaxGateFileBytes) return std::nullopt;
  std::ifstream file(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file.good() && !file.eof()) return std::nullopt;
  return text;
}

// The earlier gate's report.json in DIR, where there is one with the gate's schema.
std::optional<nlohmann::json> EarlierReportJson(const std::filesystem::path& dir) {
  const std::optional<std::string> text = ReadIfRegular(dir / "report.json");
  if (!text) return std::nullopt;
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || json.value("schema", "") != kGateReportSchema) return std::nullopt;
  return json;
}

// Whether `name` in DIR was written by a gate (`earlier`: the earlier report.json, if the gate's).
bool WrittenByGate(const std::filesystem::path& dir, std::string_view name,
                   const std::optional<nlohmann::json>& earlier) {
  if (name == "report.json") return earlier.has_value();
  const std::optional<std::string> text = ReadIfRegular(dir / name);
  if (name == "report.md") {
    std::string_view body = text ? std::string_view(*text) : std::string_view();
    while (!body.empty() && body.back() == '\n') body.remove_suffix(1);
    return text && body.ends_with(kGateMarkdownMark);
  }
  if (name == "bench.json") {
    if (!text) return false;
    const nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    return json.is_object() && json.value(std::string(kGateWrittenByKey), "") == kGateReportSchema;
  }
  // A figure: ours where the earlier report lists it.
  if (!earlier || !earlier->contains("figures") || !(*earlier)["figures"].is_array()) return false;
  for (const nlohmann::json& figure : (*earlier)["figures"]) {
    if (figure.is_string() && figure.get<std::string>() == name) return true;
  }
  return false;
}

}  // namespace

std::string MarkGateBenchJson(const std::string& json) {
  nlohmann::ordered_json marked = nlohmann::ordered_json::parse(json);
  marked[std::string(kGateWrittenByKey)] = kGateReportSchema;
  return marked.dump(1) + "\n";
}

absl::Status CheckReportFolder(const std::string& dir) {
  const std::filesystem::path folder(dir);
  const std::optional<nlohmann::json> earlier = EarlierReportJson(folder);
  for (std::string_view name : kGateReportFiles) {
    std::error_code error;
    if (!std::filesystem::exists(std::filesystem::symlink_status(folder / name, error))) continue;
    if (!WrittenByGate(folder, name, earlier)) {
      return absl::InvalidArgumentError(
          fmt::format("--report={}: {} there was not written by mxdiff gate and would be replaced: move it or choose "
                      "another folder", dir, name));
    }
  }
  return absl::OkStatus();
}

void RemoveEarlierReport(const std::string& dir) {
  const std::filesystem::path folder(dir);
  const std::optional<nlohmann::json> earlier = EarlierReportJson(folder);
  for (std::string_view name : kGateReportFiles) {
    std::error_code ignored;
    if (WrittenByGate(folder, name, earlier)) std::filesystem::remove(folder / name, ignored);
  }
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
