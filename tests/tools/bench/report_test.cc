#include "tools/bench/report.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_spec.h"
#include "tools/bench/bit_compare.h"
#include "tools/bench/throttle.h"

namespace mxdiff::bench {
namespace {

TEST(BenchSpecTest, Tactics) {
  absl::StatusOr<Tactic> t = ParseTactic("8x128x64/s16");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (Tactic{8, 128, 64, 16, 0}));
  t = ParseTactic("16x128x32/s8/w2");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (Tactic{16, 128, 32, 8, 2}));
  for (const char* bad : {"", "8x128x64", "8x128/s2", "8x128x64/2", "8x128x64/s0", "8x128x64/s2/2", "8x128x63/s2",
                          "8x128x64/s2/w", "ax128x64/s2", "8x128x64/s2/w0/x", "8x128x64/s1000"}) {
    EXPECT_FALSE(ParseTactic(bad).ok()) << bad;
  }
  EXPECT_EQ(std::string(ParseTactic("8x128x64").status().message()),
            "tactic '8x128x64': wrong number of '/' parts (expected CMxCNxCK/sSPLITS[/wSWIZZLE], e.g. 8x128x64/s16)");
}

TEST(BenchSpecTest, Arms) {
  absl::StatusOr<ArmSpec> arm = ParseArmSpec("folded");
  ASSERT_TRUE(arm.ok());
  EXPECT_EQ(arm->kind, ArmKind::kBuiltin);
  EXPECT_EQ(arm->transform, Transform::kFolded);
  EXPECT_FALSE(arm->tactic.has_value());
  EXPECT_EQ(arm->Label(), "folded");
  arm = ParseArmSpec("ordinary@16x128x32/s4");
  ASSERT_TRUE(arm.ok());
  EXPECT_EQ(arm->tactic, (Tactic{16, 128, 32, 4, 0}));
  EXPECT_EQ(arm->Label(), "ordinary@16x128x32/s4/w0");
  arm = ParseArmSpec("ext-folded:/tmp/libk.so");
  ASSERT_TRUE(arm.ok());
  EXPECT_EQ(arm->kind, ArmKind::kExternal);
  EXPECT_EQ(arm->transform, Transform::kFolded);
  EXPECT_EQ(arm->library, "/tmp/libk.so");
  EXPECT_EQ(arm->Label(), "ext-folded:/tmp/libk.so");
  EXPECT_EQ(ParseArmSpec("ext:a.so")->transform, Transform::kOrdinary);
  EXPECT_FALSE(ParseArmSpec("ext:").ok());
  EXPECT_FALSE(ParseArmSpec("fold").ok());
  EXPECT_FALSE(ParseArmSpec("folded@x").ok());
  EXPECT_EQ(std::string(ParseArmSpec("auto").status().message()),
            "arm 'auto': expected ordinary, folded, ordinary@TACTIC, folded@TACTIC, ext:PATH or ext-folded:PATH");
  absl::StatusOr<std::pair<ArmSpec, ArmSpec>> pair = ParseArmPair("ordinary,folded");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->first.transform, Transform::kOrdinary);
  EXPECT_EQ(pair->second.transform, Transform::kFolded);
  EXPECT_FALSE(ParseArmPair("ordinary").ok());
  EXPECT_FALSE(ParseArmPair("ordinary,folded,folded").ok());
}

TEST(BenchSpecTest, Shapes) {
  const std::vector<ShapeSpec> defaults = DefaultShapes();
  ASSERT_EQ(defaults.size(), 4u);
  EXPECT_EQ(defaults[0], (ShapeSpec{"W13 PP2xTP4", 1024, 4096}));
  EXPECT_EQ(defaults[1], (ShapeSpec{"W2 PP2xTP4", 4096, 512}));
  EXPECT_EQ(defaults[2], (ShapeSpec{"W13 TP8", 512, 4096}));
  EXPECT_EQ(defaults[3], (ShapeSpec{"W2 TP8", 4096, 256}));
  absl::StatusOr<std::vector<ShapeSpec>> shapes = ParseShapes("w2-tp8,1000x512");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->size(), 2u);
  EXPECT_EQ((*shapes)[0], (ShapeSpec{"W2 TP8", 4096, 256}));
  EXPECT_EQ((*shapes)[1], (ShapeSpec{"N1000 K512", 1000, 512}));
  EXPECT_EQ(ParseShapes("")->size(), 4u);
  EXPECT_EQ(std::string(ParseShapes("1000x500").status().message()), "shape '1000x500': K must be a multiple of 32");
  EXPECT_FALSE(ParseShapes("w13").ok());
  EXPECT_FALSE(ParseShapes("0x512").ok());
  EXPECT_FALSE(ParseShapes("w2-tp8,").ok());
}

TEST(BenchSpecTest, LayerShapes) {
  absl::StatusOr<std::vector<ShapeSpec>> shapes = ParseShapes("layer-tp4,layer-tp8,w2-tp4");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], (ShapeSpec{"MoE layer PP2xTP4", 4096, 512, true}));
  EXPECT_EQ((*shapes)[1], (ShapeSpec{"MoE layer TP8", 4096, 256, true}));
  EXPECT_FALSE((*shapes)[2].layer);
  EXPECT_FALSE(ParseShapes("layer").ok());
}

// The shape's verdict from its experiments: a bit difference in the naive protocol is shown but
// not a verdict; one in the A/A control is; the sound, swapped and A/A differences go to the rule.
TEST(ShapeVerdictTest, FromExperiments) {
  auto measured = [](Protocol protocol, double estimate, double low, double high) {
    ExperimentReport e;
    e.protocol = protocol;
    e.bits_checked = true;
    e.bits_equal = true;
    e.result.rounds_run = 30;
    e.result.analysis.difference.estimate = estimate;
    e.result.analysis.difference.ci = Interval{low, high};
    return e;
  };
  std::vector<ExperimentReport> experiments = {measured(Protocol::kSound, -0.55, -0.56, -0.54),
                                               measured(Protocol::kSwapped, -0.54, -0.55, -0.53),
                                               measured(Protocol::kSameArm, -0.009, -0.017, -0.001),
                                               measured(Protocol::kNaive, -46.0, -46.1, -45.9)};
  experiments[3].bits_equal = false;
  experiments[3].bits_detail = "3 elements differ";
  EXPECT_EQ(ShapeVerdict(experiments, 0, "ordinary", "folded").verdict, Verdict::kFaster);
  experiments[2].bits_equal = false;
  experiments[2].bits_detail = "1 element differs";
  const FinalVerdict mismatch = ShapeVerdict(experiments, 0, "ordinary", "folded");
  EXPECT_EQ(mismatch.verdict, Verdict::kBitMismatch);
  EXPECT_NE(mismatch.message.find("a-a: 1 element differs"), std::string::npos) << mismatch.message;
  experiments.erase(experiments.begin() + 1, experiments.end());  // sound only
  EXPECT_EQ(ShapeVerdict(experiments, 0, "ordinary", "folded").verdict, Verdict::kIncomplete);
}

TEST(BitCompareTest, DescribesDifferencesAndUnwrittenElements) {
  const std::vector<uint16_t> a = {0x3C00, 0x4000, 0x4200, 0x4400};
  std::vector<uint16_t> b = a;
  EXPECT_EQ(DescribeBitDifference(a, b, 2), "");
  b[3] = 0x4401;
  EXPECT_EQ(DescribeBitDifference(a, b, 2), "1 of 4 elements differ; row 1 col 1: 4400 vs 4401");
  b[0] = 0x8000;  // -0 against +1 would be "equal" numerically only for 0; bits are bits
  EXPECT_EQ(DescribeBitDifference(a, b, 2),
            "2 of 4 elements differ; row 0 col 0: 3c00 vs 8000; row 1 col 1: 4400 vs 4401");
  EXPECT_EQ(DescribeBitDifference(a, std::vector<uint16_t>(3), 2), "sizes differ: 4 vs 3 elements");
  EXPECT_EQ(DescribeUnwritten(a, 2), "");
  EXPECT_EQ(DescribeUnwritten(std::vector<uint16_t>{1, 0xFFFF, 2, 0xFFFF}, 2),
            "2 of 4 elements unwritten (still 0xffff), first at row 0 col 1");
}

TEST(ThrottleTest, ReasonNamesAndMask) {
  EXPECT_EQ(ReasonNames(0), "none");
  EXPECT_EQ(ReasonNames(kReasonGpuIdle | kReasonSwPowerCap), "gpu-idle|sw-power-cap");
  EXPECT_EQ(ReasonNames(0x1000 | kReasonHwThermalSlowdown), "hw-thermal|0x1000");
  EXPECT_FALSE(IsThrottled(kReasonGpuIdle | kReasonApplicationsClocksSetting | kReasonSyncBoost |
                           kReasonDisplayClockSetting));
  for (uint64_t reason : {kReasonSwPowerCap, kReasonHwSlowdown, kReasonSwThermalSlowdown, kReasonHwThermalSlowdown,
                          kReasonHwPowerBrakeSlowdown}) {
    EXPECT_TRUE(IsThrottled(reason)) << reason;
  }
}

BenchReport SmallReport() {
  BenchReport report;
  report.device = "Fake GPU";
  report.nvml = "NVML: Fake GPU";
  report.timing = "fake";
  report.seed = 77;
  report.resamples = 1000;
  report.confidence = 0.95;
  ShapeReport shape;
  shape.shape = ShapeSpec{"W2, odd", 4096, 256};  // a comma, to exercise CSV quoting
  shape.groups = 6;
  shape.rows_per_group = 1;
  shape.tactic = "8x128x64/s2/w0";
  shape.tactic_source = "dispatch table";
  shape.sets = 4;
  shape.set_bytes = 3538944;
  shape.calls_per_replay = 32;
  shape.l2_flush_bytes = 125829120;
  ExperimentReport e;
  e.protocol = Protocol::kSound;
  e.pattern = Pattern::kAbba;
  e.a = ArmRun{"ordinary", "ordinary 8x128x64/s2/w0 (ordinary-requested)"};
  e.b = ArmRun{"folded", "folded 8x128x64/s2/w0 (folded-admitted)"};
  e.bits_checked = true;
  e.bits_equal = true;
  e.seed = 78;
  const double times[2][4] = {{15.0, 14.5, 14.5, 15.0}, {15.25, 14.75, 14.75, 15.25}};
  for (int round = 0; round < 2; ++round) {
    for (int slot = 0; slot < 4; ++slot) {
      Sample s;
      s.round = round;
      s.slot = slot;
      s.arm = Slots(Pattern::kAbba)[slot];
      s.time = ReplayTime{.per_call_us = times[round][slot], .replay_us = 32 * times[round][slot], .calls = 32};
      s.clocks = ClockReading{.valid = true, .sm_mhz = 1980, .memory_mhz = 3201, .reasons = round == 1 ? 0x1u : 0x0u};
      e.result.samples.push_back(s);
    }
  }
  e.result.rounds_run = 2;
  e.result.stop = StopReason::kBudget;
  absl::StatusOr<Analysis> analysis = Analyze(e.result.samples, Pattern::kAbba, 1000, 0.95, 78);
  EXPECT_TRUE(analysis.ok());
  e.result.analysis = *analysis;
  shape.experiments.push_back(e);
  shape.verdict = FinalVerdict{Verdict::kFaster, "folded is faster than ordinary: -0.500 us [-0.500, -0.500]"};
  report.shapes.push_back(shape);
  return report;
}

TEST(ReportTest, SamplesCsv) {
  EXPECT_EQ(SamplesCsv(SmallReport()),
            "shape,protocol,schedule,round,slot,arm,arm_label,per_call_us,replay_us,calls,sm_mhz,memory_mhz,reasons,"
            "discarded\n"
            "\"W2, odd\",sound,ABBA,0,0,A,ordinary,15.000000,480.000,32,1980,3201,0x0,0\n"
            "\"W2, odd\",sound,ABBA,0,1,B,folded,14.500000,464.000,32,1980,3201,0x0,0\n"
            "\"W2, odd\",sound,ABBA,0,2,B,folded,14.500000,464.000,32,1980,3201,0x0,0\n"
            "\"W2, odd\",sound,ABBA,0,3,A,ordinary,15.000000,480.000,32,1980,3201,0x0,0\n"
            "\"W2, odd\",sound,ABBA,1,0,A,ordinary,15.250000,488.000,32,1980,3201,0x1,0\n"
            "\"W2, odd\",sound,ABBA,1,1,B,folded,14.750000,472.000,32,1980,3201,0x1,0\n"
            "\"W2, odd\",sound,ABBA,1,2,B,folded,14.750000,472.000,32,1980,3201,0x1,0\n"
            "\"W2, odd\",sound,ABBA,1,3,A,ordinary,15.250000,488.000,32,1980,3201,0x1,0\n");
}

TEST(ReportTest, JsonHoldsSummariesIntervalAndSamples) {
  const nlohmann::json json = nlohmann::json::parse(ReportJson(SmallReport()));
  EXPECT_EQ(json["tool"], "mxdiff bench");
  EXPECT_EQ(json["seed"], 77);
  const nlohmann::json& shape = json["shapes"][0];
  EXPECT_EQ(shape["name"], "W2, odd");
  EXPECT_EQ(shape["verdict"]["result"], "faster");
  const nlohmann::json& e = shape["experiments"][0];
  EXPECT_EQ(e["protocol"], "sound");
  EXPECT_EQ(e["schedule"], "ABBA");
  EXPECT_EQ(e["a"]["summary"]["median_us"], 15.125);
  EXPECT_EQ(e["b"]["summary"]["median_us"], 14.625);
  EXPECT_EQ(e["difference"]["estimate_us"], -0.5);
  EXPECT_EQ(e["difference"]["ci_low_us"], -0.5);
  EXPECT_EQ(e["difference"]["ci_high_us"], -0.5);
  EXPECT_EQ(e["difference"]["direction"], "faster");
  EXPECT_EQ(e["bits"]["equal"], true);
  EXPECT_EQ(e["samples"]["rows"].size(), 8u);
  EXPECT_EQ(e["samples"]["rows"][1][3], 14.5);
  EXPECT_EQ(e["rounds"]["rows"][1][3], -0.5);
}

TEST(ReportTest, TableNamesTheVerdictAndTheRow) {
  const std::string table = ReportTable(SmallReport());
  EXPECT_NE(table.find("| sound | ABBA | ordinary | folded | 15.125 (0.250) | 14.625 (0.250) | -0.500 [-0.500, -0.500] "
                       "| -3.31% [-3.31%, -3.31%] | 2 (0) | budget | equal | faster |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("verdict: folded is faster than ordinary"), std::string::npos);
  EXPECT_NE(table.find("seed 77 (replay with --bench_seed=77)"), std::string::npos);
}

TEST(ReportTest, ALayerShapeSaysUsPerLayerCall) {
  BenchReport report = SmallReport();
  ShapeReport& shape = report.shapes[0];
  shape.shape = ShapeSpec{"MoE layer PP2xTP4", 4096, 512, true};
  shape.groups = 257;
  shape.tactic = "W13 8x128x64/s16/w0, W2 8x128x64/s2/w0";
  shape.sets = 64;
  shape.set_bytes = 890000000;
  shape.calls_per_replay = 1;
  const std::string table = ReportTable(report);
  EXPECT_NE(table.find("MoE layer PP2xTP4 (the whole MoE layer: hidden 4096, intermediate 512 per rank, 257 experts, "
                       "1 token per call): tactics W13 8x128x64/s16/w0, W2 8x128x64/s2/w0 (dispatch table), weights "
                       "890.0 MB per arm, 64 routings rotating, one layer call per replay (times are us per layer)"),
            std::string::npos)
      << table;
  EXPECT_EQ(nlohmann::json::parse(ReportJson(report))["shapes"][0]["layer"], true);
  EXPECT_EQ(nlohmann::json::parse(ReportJson(SmallReport()))["shapes"][0]["layer"], false);
}

}  // namespace
}  // namespace mxdiff::bench
