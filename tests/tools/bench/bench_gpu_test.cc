// mxdiff bench end to end on a GPU, on small shapes and short budgets: the sound protocol and
// its controls run and agree bit for bit, a bit change stops the timing, the naive protocol
// runs beside it, and an external kernel arm is timed through its host ABI. Skips without a GPU.
#include <cstdlib>
#include <filesystem>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "kernels/gemm_runner.h"
#include "kernels/tune_on_first_use.h"
#include "tools/bench/bench_driver.h"
#include "tools/bench/layer_bench.h"

namespace mxdiff::bench {
namespace {

class BenchGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GemmRunner>> runner = GemmRunner::Create();
    if (!runner.ok()) GTEST_SKIP() << "no CUDA device: " << runner.status();
  }

  static BenchConfig SmallConfig(std::string_view arms) {
    BenchConfig config;
    auto pair = ParseArmPair(arms);
    EXPECT_TRUE(pair.ok()) << pair.status();
    config.a = pair->first;
    config.b = pair->second;
    config.shapes = {ShapeSpec{"small", 256, 512}};
    config.stopping = StoppingRule{.target_relative_half_width = 0.01, .min_rounds = 10, .budget_seconds = 1.0};
    config.resamples = 1000;
    config.check_resamples = 200;
    config.sets_bytes = size_t(8) << 20;
    config.seed = 20261205;
    return config;
  }
  // Ordinary against folded with the naive protocol too, runners in `mode`, half a second each.
  static BenchConfig NaiveConfig(FirstUse mode) {
    BenchConfig config = SmallConfig("ordinary,folded");
    config.naive = true;
    config.first_use = mode;
    config.stopping.budget_seconds = 0.5;
    return config;
  }
};

TEST_F(BenchGpuTest, SoundProtocolControlsAndNaive) {
  BenchConfig config = SmallConfig("ordinary,folded");
  config.naive = true;
  absl::StatusOr<BenchReport> report = RunBench(config);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->shapes.size(), 1u);
  const ShapeReport& shape = report->shapes[0];
  ASSERT_TRUE(shape.error.empty()) << shape.error;
  ASSERT_EQ(shape.experiments.size(), 4u);
  const Protocol expected[] = {Protocol::kSound, Protocol::kSwapped, Protocol::kSameArm, Protocol::kNaive};
  for (size_t i = 0; i < 4; ++i) {
    const ExperimentReport& e = shape.experiments[i];
    EXPECT_EQ(e.protocol, expected[i]);
    EXPECT_TRUE(e.error.empty()) << ProtocolName(e.protocol) << ": " << e.error;
    EXPECT_TRUE(e.has_analysis()) << ProtocolName(e.protocol);
    EXPECT_TRUE(e.bits_checked) << ProtocolName(e.protocol);
    EXPECT_EQ(e.result.samples.size(), size_t(4 * e.result.rounds_run));
    EXPECT_GE(e.result.rounds_run, 2);
    for (const Sample& s : e.result.samples) EXPECT_GT(s.time.per_call_us, 0.0);
  }
  // The pinned tactic: both arms ran exactly it, each its own variant.
  const ExperimentReport& sound = shape.experiments[0];
  EXPECT_TRUE(sound.bits_equal) << sound.bits_detail;
  EXPECT_EQ(sound.a.route, fmt::format("ordinary {} (ordinary-requested)", shape.tactic));
  EXPECT_EQ(sound.b.route, fmt::format("folded {} (folded-admitted)", shape.tactic));
  EXPECT_EQ(sound.pattern, Pattern::kAbba);
  EXPECT_EQ(shape.experiments[1].pattern, Pattern::kBaab);
  EXPECT_EQ(shape.experiments[2].b.label, "ordinary'");
  // The naive arms ran whatever tactic their runner chose; with the same partition, the same bits.
  const ExperimentReport& naive = shape.experiments[3];
  const auto tactic_of = [](const std::string& route) { return route.substr(route.find(' ') + 1); };
  if (tactic_of(naive.a.route) == tactic_of(naive.b.route)) {
    EXPECT_TRUE(naive.bits_equal) << naive.a.route << " / " << naive.b.route << ": " << naive.bits_detail;
  }
  EXPECT_NE(shape.verdict.verdict, Verdict::kBitMismatch) << shape.verdict.message;
  EXPECT_NE(shape.verdict.verdict, Verdict::kIncomplete) << shape.verdict.message;
  EXPECT_GT(shape.l2_flush_bytes, 0u);
  EXPECT_EQ(shape.calls_per_replay % shape.sets, 0);
}

TEST_F(BenchGpuTest, ABitChangeStopsTheComparisonBeforeTiming) {
  // Different split counts partition K differently: the bits change, so nothing is timed.
  absl::StatusOr<BenchReport> report = RunBench(SmallConfig("ordinary@8x128x64/s1,ordinary@8x128x64/s4"));
  ASSERT_TRUE(report.ok()) << report.status();
  const ShapeReport& shape = report->shapes[0];
  ASSERT_EQ(shape.experiments.size(), 1u);
  const ExperimentReport& e = shape.experiments[0];
  EXPECT_TRUE(e.bits_checked);
  EXPECT_FALSE(e.bits_equal);
  EXPECT_NE(e.bits_detail.find("elements differ"), std::string::npos) << e.bits_detail;
  EXPECT_EQ(e.result.rounds_run, 0);
  EXPECT_EQ(shape.verdict.verdict, Verdict::kBitMismatch);
}

TEST_F(BenchGpuTest, ExternalKernelArmIsTimedThroughItsHostAbi) {
  const char* env = std::getenv("MXDIFF_EXAMPLE_KERNEL");
  const std::string library = env != nullptr ? env : MXDIFF_EXAMPLE_KERNEL_PATH;
  if (!std::filesystem::exists(library)) GTEST_SKIP() << "no example kernel library at " << library;
  BenchConfig config = SmallConfig(fmt::format("ordinary,ext:{}", library));
  config.shapes = {ShapeSpec{"tiny", 128, 64}};
  config.groups = 2;
  config.sets_bytes = 0;
  config.stopping.budget_seconds = 0.5;
  absl::StatusOr<BenchReport> report = RunBench(config);
  ASSERT_TRUE(report.ok()) << report.status();
  const ShapeReport& shape = report->shapes[0];
  ASSERT_TRUE(shape.error.empty()) << shape.error;
  ASSERT_GE(shape.experiments.size(), 1u);
  const ExperimentReport& e = shape.experiments[0];
  EXPECT_TRUE(e.error.empty()) << e.error;
  EXPECT_TRUE(e.bits_equal) << e.bits_detail;  // the GPU kernel and the reference behind the ABI
  EXPECT_NE(report->timing.find("host calls"), std::string::npos);
  EXPECT_NE(e.b.route.find("ordinary"), std::string::npos);
}

// --first_use=tune: the naive protocol's A graph holds the generic fallback (captured before the
// shape was tuned), its B graph the tuner's winner; the sound protocol pins the same tactic in
// both modes.
TEST_F(BenchGpuTest, TuneOnFirstUseChangesTheNaiveArmsButNotTheSoundOnes) {
  const auto tactic_of = [](const std::string& route) {
    const size_t space = route.find(' ');
    return route.substr(space + 1, route.find(' ', space + 1) - space - 1);
  };
  std::string sound_tactic[2];
  for (FirstUse mode : {FirstUse::kTable, FirstUse::kTune}) {
    const BenchConfig config = NaiveConfig(mode);
    absl::StatusOr<BenchReport> report = RunBench(config);
    ASSERT_TRUE(report.ok()) << report.status();
    const ShapeReport& shape = report->shapes[0];
    ASSERT_EQ(shape.experiments.size(), 4u) << shape.error;
    const ExperimentReport& sound = shape.experiments[0];
    const ExperimentReport& naive = shape.experiments[3];
    EXPECT_TRUE(naive.error.empty()) << naive.error;
    EXPECT_TRUE(naive.has_analysis());
    sound_tactic[int(mode)] = tactic_of(sound.a.route);
    EXPECT_EQ(tactic_of(sound.b.route), sound_tactic[int(mode)]);
    if (mode == FirstUse::kTune) {
      EXPECT_EQ(tactic_of(naive.a.route), TacticName(kGenericTactic)) << naive.a.route;
      EXPECT_NE(naive.method.find("tuned the shape at its first use"), std::string::npos) << naive.method;
    } else {
      EXPECT_EQ(tactic_of(naive.a.route), shape.tactic) << naive.a.route;  // the table's
    }
  }
  EXPECT_EQ(sound_tactic[0], sound_tactic[1]);
}

// The whole MoE layer, small: sound, swapped, A/A and naive run, the arms agree bit for bit at
// the layer output, every replay is one layer call; with --first_use=tune the naive A graph
// holds the generic fallback and B the tuned tactics, while the sound arms' tactics stay.
TEST_F(BenchGpuTest, LayerBenchOfASmallLayer) {
  LayerBenchSpec spec;
  spec.name = "small layer";
  spec.shape = MoeShape{.hidden = 512, .intermediate = 128, .experts = 16, .top_k = 4, .shared_expert = true};
  spec.routings = 8;
  std::string sound_routes[2];
  for (FirstUse mode : {FirstUse::kTable, FirstUse::kTune}) {
    const BenchConfig config = NaiveConfig(mode);
    absl::StatusOr<ShapeReport> report = RunLayerBench(spec, config);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_TRUE(report->error.empty()) << report->error;
    ASSERT_EQ(report->experiments.size(), 4u);
    for (const ExperimentReport& e : report->experiments) {
      EXPECT_TRUE(e.error.empty()) << ProtocolName(e.protocol) << ": " << e.error;
      EXPECT_TRUE(e.has_analysis()) << ProtocolName(e.protocol);
      for (const Sample& s : e.result.samples) EXPECT_EQ(s.time.calls, 1);
    }
    const ExperimentReport& sound = report->experiments[0];
    EXPECT_TRUE(sound.bits_equal) << sound.bits_detail;
    EXPECT_NE(sound.b.route.find("folded"), std::string::npos) << sound.b.route;
    sound_routes[int(mode)] = sound.a.route;
    const ExperimentReport& naive = report->experiments[3];
    if (mode == FirstUse::kTune) {
      EXPECT_NE(naive.a.route.find(TacticName(kGenericTactic)), std::string::npos) << naive.a.route;
      EXPECT_NE(naive.method.find("tuned the shape at its first use"), std::string::npos) << naive.method;
    }
    EXPECT_NE(report->verdict.verdict, Verdict::kBitMismatch) << report->verdict.message;
  }
  EXPECT_EQ(sound_routes[0], sound_routes[1]);
}

TEST_F(BenchGpuTest, LayerShapeThroughRunBench) {
  BenchConfig config = SmallConfig("ordinary,folded");
  config.shapes = {ShapeSpec{"tiny layer", 512, 128, true}};
  config.stopping.budget_seconds = 0.3;
  absl::StatusOr<BenchReport> report = RunBench(config);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->shapes.size(), 1u);
  EXPECT_EQ(report->shapes[0].groups, 257);  // 256 routed + the shared expert
  EXPECT_EQ(report->shapes[0].calls_per_replay, 1);
  EXPECT_TRUE(report->shapes[0].error.empty()) << report->shapes[0].error;
}

}  // namespace
}  // namespace mxdiff::bench
