// The speed step's decision (tools/gate/gate_speed.h) and the model's per-token figures, from
// synthetic layer and GEMM bench reports, on the CPU.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/gate/gate_report.h"
#include "tools/gate/gate_speed.h"

namespace mxdiff::gate {
namespace {

bench::ExperimentReport Experiment(bench::Protocol protocol, double a_us, double b_us, double low, double high) {
  bench::ExperimentReport e;
  e.protocol = protocol;
  e.a.label = "ordinary";
  e.b.label = "folded";
  e.result.rounds_run = 40;
  e.result.analysis.a.median = a_us;
  e.result.analysis.b.median = b_us;
  e.result.analysis.difference.estimate = b_us - a_us;
  e.result.analysis.difference.ci = {low, high};
  return e;
}

// A measurement with the sound figures a -> b (interval +-0.5 us) and the naive ones beside it.
SpeedMeasurement Measured(std::string name, bool layer, bench::Verdict verdict, double a, double b, double naive_a,
                          double naive_b) {
  SpeedMeasurement m{.name = std::move(name), .layer = layer};
  m.report.experiments.push_back(Experiment(bench::Protocol::kSound, a, b, b - a - 0.5, b - a + 0.5));
  m.report.experiments.push_back(Experiment(bench::Protocol::kSameArm, a, a, -0.1, 0.1));
  m.report.experiments.push_back(Experiment(bench::Protocol::kNaive, naive_a, naive_b, naive_b - naive_a - 1,
                                            naive_b - naive_a + 1));
  m.report.verdict = {verdict, std::string(bench::VerdictName(verdict))};
  return m;
}

std::vector<SpeedMeasurement> AllFaster() {
  return {Measured("W13 layers.0", false, bench::Verdict::kFaster, 20, 18, 30, 15),
          Measured("W2 layers.0", false, bench::Verdict::kUnresolved, 12, 12, 14, 12),
          Measured("layers.0", true, bench::Verdict::kFaster, 95, 90, 95, 53)};
}

TEST(GateSpeedTest, FasterOnTheWholeLayerWithEveryControlPassingPasses) {
  const SpeedDecision d = DecideSpeed(AllFaster());
  EXPECT_EQ(d.outcome, StepOutcome::kPassed) << d.summary;
  EXPECT_EQ(d.summary, "the candidate is faster on the whole layer of 1 layer(s), every control passing (faster: W13 "
                       "layers.0, layers.0; nothing slower)");
  ASSERT_EQ(d.details.size(), 3u);
  // The naive protocol's answer beside the sound one: the seed's 95 -> 53.
  EXPECT_EQ(d.details[2], "layers.0 (whole layer, us per layer): sound: ordinary 95.000, folded 90.000, B-A -5.000 us "
                          "[-5.500, -4.500] (-5.3%): faster: faster; naive protocol beside it: ordinary 95.000, folded "
                          "53.000, B-A -42.000 us [-43.000, -41.000] (-44.2%): it would say faster");
}

// Two kernel libraries: no layer graph runs them, so each timed GEMM is the unit and must be faster.
TEST(GateSpeedTest, WithKernelLibrariesEachTimedGemmMustBeFaster) {
  std::vector<SpeedMeasurement> gemms = {Measured("W13 layers.0", false, bench::Verdict::kFaster, 20, 18, 20, 18),
                                         Measured("W2 layers.0", false, bench::Verdict::kFaster, 12, 11, 12, 11)};
  SpeedDecision d = DecideSpeed(gemms, SpeedUnit::kGemm);
  EXPECT_EQ(d.outcome, StepOutcome::kPassed) << d.summary;
  EXPECT_EQ(d.summary, "the candidate is faster on each of 2 timed GEMM(s), every control passing (faster: W13 "
                       "layers.0, W2 layers.0; nothing slower)");
  EXPECT_EQ(DecideSpeed(gemms).outcome, StepOutcome::kNoVerdict);  // the layer unit: no layer was timed
  gemms[1].report.verdict.verdict = bench::Verdict::kUnresolved;
  d = DecideSpeed(gemms, SpeedUnit::kGemm);
  EXPECT_EQ(d.outcome, StepOutcome::kNoVerdict);
  EXPECT_EQ(d.summary, "no verdict: W2 layers.0 unresolved (the GEMM not resolved faster)");
  gemms[1].report.verdict.verdict = bench::Verdict::kSlower;
  EXPECT_EQ(DecideSpeed(gemms, SpeedUnit::kGemm).outcome, StepOutcome::kFailed);
  EXPECT_EQ(DecideSpeed({}, SpeedUnit::kGemm).summary, "no GEMM was timed with the candidate running: no verdict");
}

TEST(GateSpeedTest, SlowerAnywhereSoundOrABitDifferenceFails) {
  std::vector<SpeedMeasurement> m = AllFaster();
  m[1].report.verdict.verdict = bench::Verdict::kSlower;  // W2 slower, the layer still faster
  SpeedDecision d = DecideSpeed(m);
  EXPECT_EQ(d.outcome, StepOutcome::kFailed);
  EXPECT_EQ(d.summary, "the sound protocol says the candidate is slower (or a bit differs): W2 layers.0 slower");
  m = AllFaster();
  m[2].report.verdict.verdict = bench::Verdict::kBitMismatch;
  EXPECT_EQ(DecideSpeed(m).outcome, StepOutcome::kFailed);
}

TEST(GateSpeedTest, ALayerNotFasterOrAFailedControlIsNoVerdictWhateverTheNaiveProtocolSays) {
  std::vector<SpeedMeasurement> m = AllFaster();
  m[2].report.verdict.verdict = bench::Verdict::kUnresolved;  // naive still says 95 -> 53
  SpeedDecision d = DecideSpeed(m);
  EXPECT_EQ(d.outcome, StepOutcome::kNoVerdict);
  EXPECT_EQ(d.summary, "no verdict: layers.0 unresolved (the whole layer not resolved faster)");
  EXPECT_NE(d.details[2].find("it would say faster"), std::string::npos) << d.details[2];
  for (bench::Verdict control : {bench::Verdict::kTooNoisy, bench::Verdict::kPositionEffect, bench::Verdict::kIncomplete}) {
    m = AllFaster();
    m[0].report.verdict.verdict = control;  // a GEMM's control failed, the layer faster
    EXPECT_EQ(DecideSpeed(m).outcome, StepOutcome::kNoVerdict) << bench::VerdictName(control);
  }
  m = AllFaster();
  m[2].report.error = "layers.0: cudaMalloc: out of memory";  // a layer bench that could not run
  EXPECT_EQ(DecideSpeed(m).summary, "no verdict: layers.0 incomplete");
  m = AllFaster();
  m.pop_back();  // the GEMMs alone never decide
  EXPECT_EQ(DecideSpeed(m).outcome, StepOutcome::kNoVerdict);
  EXPECT_EQ(DecideSpeed(m).summary, "no whole layer was timed with the candidate running: no verdict");
}

TEST(GateSpeedTest, ALayerWhereFoldedRunsNowhereNeedNotBeFaster) {
  std::vector<SpeedMeasurement> m = AllFaster();
  m.push_back(Measured("layers.1", true, bench::Verdict::kUnresolved, 95, 95, 95, 95));
  m.back().candidate_runs = false;
  EXPECT_EQ(DecideSpeed(m).outcome, StepOutcome::kPassed) << DecideSpeed(m).summary;
  m.back().report.verdict.verdict = bench::Verdict::kSlower;
  EXPECT_EQ(DecideSpeed(m).outcome, StepOutcome::kFailed);
}

TEST(GateSpeedTest, UsPerTokenSumsTheMeasuredLayersBesideTheSeedsProjection) {
  std::vector<SpeedMeasurement> m = AllFaster();
  m.push_back(Measured("layers.1", true, bench::Verdict::kFaster, 97, 93, 99, 60));
  const std::optional<PerToken> t = ModelPerToken(m, 43);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->measured_layers, 2u);
  EXPECT_DOUBLE_EQ(t->sound.a_us, 95 + 97);
  EXPECT_DOUBLE_EQ(t->sound.b_us, 90 + 93);
  ASSERT_TRUE(t->naive.has_value());
  EXPECT_DOUBLE_EQ(t->naive->b_us, 53 + 60);
  EXPECT_DOUBLE_EQ(t->projection.a_us, 95 * 43);
  ASSERT_TRUE(t->naive_projection.has_value());
  EXPECT_DOUBLE_EQ(t->naive_projection->b_us, 53 * 43);  // the seed's method
  EXPECT_NE(PerTokenLine(*t).find("summed over the 2 measured layer(s) of 43: ordinary 192.00, candidate 183.00"),
            std::string::npos) << PerTokenLine(*t);
  m[2].report.experiments.clear();  // a layer without figures: no sum
  EXPECT_FALSE(ModelPerToken(m, 43).has_value());
  EXPECT_FALSE(ModelPerToken({}, 43).has_value());
}

// The keywords report.schema.json uses (type, const, enum, required, properties,
// additionalProperties, items), as gate_cli_test.py checks them: the problems found.
void Validate(const nlohmann::json& value, const nlohmann::json& schema, const std::string& where,
              std::vector<std::string>& problems) {
  const std::string type = schema.value("type", "");
  const bool typed = type.empty() || (type == "object" && value.is_object()) || (type == "array" && value.is_array()) ||
                     (type == "string" && value.is_string()) || (type == "boolean" && value.is_boolean()) ||
                     (type == "integer" && value.is_number_integer()) || (type == "number" && value.is_number());
  if (!typed) return problems.push_back(fmt::format("{}: {} is not {}", where, value.dump(), type));
  if (schema.contains("const") && value != schema["const"]) problems.push_back(where + ": not the const");
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end()) {
    problems.push_back(fmt::format("{}: {} not in the enum", where, value.dump()));
  }
  if (value.is_object()) {
    for (const auto& key : schema.value("required", nlohmann::json::array())) {
      if (!value.contains(key)) problems.push_back(fmt::format("{}: no {}", where, key.get<std::string>()));
    }
    for (const auto& [key, item] : value.items()) {
      const nlohmann::json properties = schema.value("properties", nlohmann::json::object());
      const nlohmann::json sub = properties.contains(key) ? properties[key] : schema.value("additionalProperties", nlohmann::json::object());
      if (sub.is_boolean() && !sub.get<bool>()) problems.push_back(fmt::format("{}: unexpected {}", where, key));
      if (sub.is_object()) Validate(item, sub, where + "." + key, problems);
    }
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) Validate(value[i], schema["items"], fmt::format("{}[{}]", where, i), problems);
  }
}

TEST(GateSpeedTest, TheReportsSpeedSectionHoldsBothProtocolsAndMatchesTheSchema) {
  GateReport report;
  report.speed = AllFaster();
  report.speed.push_back(Measured("layers.1", true, bench::Verdict::kFaster, 97, 93, 99, 60));
  report.speed.back().report.experiments.pop_back();  // no naive figures on this one
  report.per_token = ModelPerToken(report.speed, 43);
  report.bench_json = "bench.json";
  report.decision = DecideGate({});
  const nlohmann::json json = nlohmann::json::parse(GateReportJson(report));
  std::ifstream file(MXDIFF_GATE_SCHEMA);
  const nlohmann::json schema = nlohmann::json::parse(file);
  std::vector<std::string> problems;
  Validate(json, schema, "report.json", problems);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  const nlohmann::json& speed = json["speed"];
  EXPECT_EQ(speed["bench_json"], "bench.json");
  EXPECT_EQ(speed["naive_first_use"], "tune");
  ASSERT_EQ(speed["measurements"].size(), 4u);
  const nlohmann::json& layer = speed["measurements"][2];
  EXPECT_EQ(layer["kind"], "layer");
  EXPECT_EQ(layer["unit"], "us per layer");
  EXPECT_EQ(layer["verdict"], "faster");
  EXPECT_EQ(layer["sound"]["b_us"], 90.0);
  EXPECT_EQ(layer["naive"]["b_us"], 53.0);
  EXPECT_EQ(layer["naive_answer"], "faster");
  EXPECT_FALSE(speed["measurements"][3].contains("naive"));
  EXPECT_EQ(speed["per_token"]["measured_layers"], 2);
  EXPECT_EQ(speed["per_token"]["projection"]["a_us"], 95.0 * 43);
  EXPECT_FALSE(speed["per_token"].contains("naive"));  // one layer without naive figures: no naive sum
  const std::string markdown = GateReportMarkdown(report);
  EXPECT_NE(markdown.find("| layers.0 | us per layer | 95.000 | 90.000 | -5.000 [-5.500, -4.500] | faster | 95.000 | "
                          "53.000 | -42.000 [-43.000, -41.000] | faster |\n"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| layers.1 | us per layer | 97.000 | 93.000 | -4.000 [-4.500, -3.500] | faster | - | - | - | - |\n"),
            std::string::npos) << markdown;
  // An unknown field is caught (the validator is not blind).
  nlohmann::json extra = json;
  extra["speed"]["measurements"][0]["median"] = 1;
  problems.clear();
  Validate(extra, schema, "report.json", problems);
  EXPECT_EQ(problems, (std::vector<std::string>{"report.json.speed.measurements[0]: unexpected median"}));
}

}  // namespace
}  // namespace mxdiff::gate
