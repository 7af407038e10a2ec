#include "tools/bench/report.h"

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace mxdiff::bench {
namespace {

using Json = nlohmann::ordered_json;

// RFC 4180: quoted where a comma, quote or line break would break the row.
std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

Json SummaryJson(const Summary& s) {
  return Json{{"count", s.count}, {"median_us", s.median}, {"p05_us", s.p05}, {"p25_us", s.p25},
              {"p75_us", s.p75},  {"p95_us", s.p95},       {"min_us", s.min}, {"max_us", s.max},
              {"mean_us", s.mean}};
}

Json ExperimentJson(const ExperimentReport& e) {
  Json json{{"protocol", ProtocolName(e.protocol)},
            {"schedule", PatternName(e.pattern)},
            {"a", {{"label", e.a.label}, {"route", e.a.route}}},
            {"b", {{"label", e.b.label}, {"route", e.b.route}}},
            {"method", e.method},
            {"bits", {{"checked", e.bits_checked}, {"equal", e.bits_equal}, {"detail", e.bits_detail}}},
            {"error", e.error},
            {"bootstrap_seed", e.seed},
            {"rounds_run", e.result.rounds_run},
            {"rounds_discarded", e.result.rounds_discarded},
            {"stop", StopReasonName(e.result.stop)},
            {"seconds", e.result.seconds},
            {"analysis_error", e.result.analysis_status.ok() ? "" : std::string(e.result.analysis_status.message())}};
  if (e.has_analysis()) {
    const Analysis& a = e.result.analysis;
    json["a"]["summary"] = SummaryJson(a.a);
    json["b"]["summary"] = SummaryJson(a.b);
    json["difference"] = Json{{"statistic", "median of per-round (mean B - mean A), us per call"},
                              {"estimate_us", a.difference.estimate},
                              {"ci_low_us", a.difference.ci.low},
                              {"ci_high_us", a.difference.ci.high},
                              {"relative", a.relative},
                              {"relative_ci_low", a.relative_ci.low},
                              {"relative_ci_high", a.relative_ci.high},
                              {"confidence", a.difference.confidence},
                              {"resamples", a.difference.resamples},
                              {"direction", DirectionName(a.direction)}};
    Json rounds = Json::array();
    for (const RoundResult& r : a.rounds) rounds.push_back({r.round, r.a_us, r.b_us, r.difference_us});
    json["rounds"] = Json{{"columns", {"round", "a_us", "b_us", "difference_us"}}, {"rows", rounds}};
  }
  Json samples = Json::array();
  for (const Sample& s : e.result.samples) {
    samples.push_back({s.round, s.slot, s.arm, s.time.per_call_us, s.clocks.sm_mhz, s.clocks.reasons, s.discarded});
  }
  json["samples"] =
      Json{{"columns", {"round", "slot", "arm", "per_call_us", "sm_mhz", "reasons", "discarded"}}, {"rows", samples}};
  return json;
}

std::string Percent(double x) { return fmt::format("{:+.2f}%", 100 * x); }

}  // namespace

std::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kSound:
      return "sound";
    case Protocol::kSwapped:
      return "swapped";
    case Protocol::kSameArm:
      return "a-a";
    case Protocol::kNaive:
      return "naive";
  }
  return "?";
}

std::string SamplesCsv(const BenchReport& report) {
  std::string csv =
      "shape,protocol,schedule,round,slot,arm,arm_label,per_call_us,replay_us,calls,sm_mhz,memory_mhz,reasons,"
      "discarded\n";
  for (const ShapeReport& shape : report.shapes) {
    for (const ExperimentReport& e : shape.experiments) {
      for (const Sample& s : e.result.samples) {
        csv += fmt::format("{},{},{},{},{},{},{},{:.6f},{:.3f},{},{},{},{:#x},{}\n", CsvField(shape.shape.name),
                           ProtocolName(e.protocol), PatternName(e.pattern), s.round, s.slot, s.arm == 0 ? 'A' : 'B',
                           CsvField(s.arm == 0 ? e.a.label : e.b.label), s.time.per_call_us, s.time.replay_us,
                           s.time.calls, s.clocks.sm_mhz, s.clocks.memory_mhz, s.clocks.reasons,
                           s.discarded ? 1 : 0);
      }
    }
  }
  return csv;
}

std::string ReportJson(const BenchReport& report) {
  Json json{{"tool", "mxdiff bench"},
            {"command", report.command},
            {"device", report.device},
            {"nvml", report.nvml},
            {"timing", report.timing},
            {"seed", report.seed},
            {"stopping",
             {{"target_relative_half_width", report.stopping.target_relative_half_width},
              {"min_rounds", report.stopping.min_rounds},
              {"max_rounds", report.stopping.max_rounds},
              {"budget_seconds", report.stopping.budget_seconds},
              {"check_every", report.stopping.check_every}}},
            {"resamples", report.resamples},
            {"confidence", report.confidence}};
  Json shapes = Json::array();
  for (const ShapeReport& shape : report.shapes) {
    Json experiments = Json::array();
    for (const ExperimentReport& e : shape.experiments) experiments.push_back(ExperimentJson(e));
    shapes.push_back(Json{{"name", shape.shape.name},
                          {"layer", shape.shape.layer},
                          {"n", shape.shape.n},
                          {"k", shape.shape.k},
                          {"groups", shape.groups},
                          {"rows_per_group", shape.rows_per_group},
                          {"tactic", shape.tactic},
                          {"tactic_source", shape.tactic_source},
                          {"weight_sets", shape.sets},
                          {"set_bytes", shape.set_bytes},
                          {"calls_per_replay", shape.calls_per_replay},
                          {"l2_flush_bytes", shape.l2_flush_bytes},
                          {"clocks", shape.clocks},
                          {"error", shape.error},
                          {"verdict", {{"result", VerdictName(shape.verdict.verdict)}, {"message", shape.verdict.message}}},
                          {"experiments", experiments}});
  }
  json["shapes"] = shapes;
  return json.dump(1) + "\n";
}

std::string ReportTable(const BenchReport& report) {
  std::string text = fmt::format("device {}; {}; timing: {}\n", report.device, report.nvml, report.timing);
  text += fmt::format(
      "stopping: CI half-width <= {:.2f}% of A's median after >= {} rounds, or {:.0f} s, or {} rounds; bootstrap {} "
      "resamples, {:.0f}% CI, seed {} (replay with --bench_seed={})\n",
      100 * report.stopping.target_relative_half_width, report.stopping.min_rounds, report.stopping.budget_seconds,
      report.stopping.max_rounds, report.resamples, 100 * report.confidence, report.seed, report.seed);
  for (const ShapeReport& shape : report.shapes) {
    const std::string flush = shape.l2_flush_bytes > 0
                                  ? fmt::format("L2 flushed ({:.0f} MB) before every replay", shape.l2_flush_bytes * 1e-6)
                                  : std::string("no L2 flush");
    if (shape.shape.layer) {  // layer_bench.h: us per layer call
      text += fmt::format("\n{} (the whole MoE layer: hidden {}, intermediate {} per rank, {} experts, {} token{} per "
                          "call)",
                          shape.shape.name, shape.shape.n, shape.shape.k, shape.groups, shape.rows_per_group,
                          shape.rows_per_group == 1 ? "" : "s");
    } else {
      text += fmt::format("\n{} (N {}, K {}, {} experts x {} row{})", shape.shape.name, shape.shape.n, shape.shape.k,
                          shape.groups, shape.rows_per_group, shape.rows_per_group == 1 ? "" : "s");
    }
    if (!shape.error.empty()) {
      text += fmt::format(": ERROR {}\n", shape.error);
      continue;
    }
    if (shape.shape.layer) {
      text += fmt::format(": tactics {} ({}), weights {:.1f} MB per arm, {} routings rotating, one layer call per "
                          "replay (times are us per layer), {}\n",
                          shape.tactic, shape.tactic_source, shape.set_bytes * 1e-6, shape.sets, flush);
    } else {
      text += fmt::format(": tactic {} ({}), {} weight sets of {:.1f} MB, {} calls per replay, {}\n", shape.tactic,
                          shape.tactic_source, shape.sets, shape.set_bytes * 1e-6, shape.calls_per_replay, flush);
    }
    if (!shape.clocks.empty()) text += fmt::format("  clocks at start: {}\n", shape.clocks);
    text +=
        "| protocol | order | A | B | A median us (IQR) | B median us (IQR) | B-A us [95% CI] | B-A % [95% CI] | "
        "rounds (throttled) | stop | bits | B vs A |\n"
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n";
    for (const ExperimentReport& e : shape.experiments) {
      const std::string bits = !e.bits_checked ? "unchecked" : e.bits_equal ? "equal" : "DIFFER";
      if (!e.has_analysis()) {
        const std::string why = !e.error.empty() ? e.error : std::string(e.result.analysis_status.message());
        text += fmt::format("| {} | {} | {} | {} | | | | | {} ({}) | {} | {} | ERROR: {} |\n", ProtocolName(e.protocol),
                            PatternName(e.pattern), e.a.label, e.b.label, e.result.rounds_run,
                            e.result.rounds_discarded, StopReasonName(e.result.stop), bits, why);
        continue;
      }
      const Analysis& a = e.result.analysis;
      text += fmt::format(
          "| {} | {} | {} | {} | {:.3f} ({:.3f}) | {:.3f} ({:.3f}) | {:+.3f} [{:+.3f}, {:+.3f}] | {} [{}, {}] | {} ({}) "
          "| {} | {} | {} |\n",
          ProtocolName(e.protocol), PatternName(e.pattern), e.a.label, e.b.label, a.a.median, a.a.iqr(), a.b.median,
          a.b.iqr(), a.difference.estimate, a.difference.ci.low, a.difference.ci.high, Percent(a.relative),
          Percent(a.relative_ci.low), Percent(a.relative_ci.high), e.result.rounds_run, e.result.rounds_discarded,
          StopReasonName(e.result.stop), bits, DirectionName(a.direction));
    }
    for (const ExperimentReport& e : shape.experiments) {
      text += fmt::format("  {}: A ran {}; B ran {}. {}\n", ProtocolName(e.protocol), e.a.route, e.b.route, e.method);
      if (e.bits_checked && !e.bits_equal) text += fmt::format("    outputs differ: {}\n", e.bits_detail);
    }
    text += fmt::format("verdict: {}\n", shape.verdict.message);
  }
  return text;
}

FinalVerdict ShapeVerdict(const std::vector<ExperimentReport>& experiments, double min_effect_us,
                          std::string_view a_label, std::string_view b_label) {
  VerdictInput input;
  input.bits_equal = true;
  input.min_effect_us = min_effect_us;
  for (const ExperimentReport& e : experiments) {
    if (e.protocol == Protocol::kNaive || !e.bits_checked || e.bits_equal) continue;
    input.bits_equal = false;
    input.bits_detail = fmt::format("{}: {}", ProtocolName(e.protocol), e.bits_detail);
    break;
  }
  for (const ExperimentReport& e : experiments) {
    if (!e.has_analysis()) continue;
    const DifferenceView view{e.result.analysis.difference.estimate, e.result.analysis.difference.ci};
    if (e.protocol == Protocol::kSound) input.sound = view;
    if (e.protocol == Protocol::kSwapped) input.swapped = view;
    if (e.protocol == Protocol::kSameArm) input.same_arm = view;
  }
  return DecideVerdict(input, a_label, b_label);
}

}  // namespace mxdiff::bench
