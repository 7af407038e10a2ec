#include "tools/bench/experiment.h"

#include <functional>

#include "gtest/gtest.h"
#include "tools/bench/verdict.h"

namespace mxdiff::bench {
namespace {

// A simulated machine: a clock that advances per replay, and arms whose time may depend on the
// replay's position in its round.
struct World {
  double now = 0;
  int replays = 0;
};

class FakeArm final : public TimedArm {
 public:
  // `time(replay index, slot in the round)` in microseconds per call.
  FakeArm(World& world, std::function<double(int, int)> time) : world_(world), time_(std::move(time)) {}
  absl::StatusOr<ReplayTime> TimeReplay() override {
    const int replay = world_.replays++;
    world_.now += 0.1;
    if (fail_at_ >= 0 && replay == fail_at_) return absl::InternalError("device fell over");
    const double us = time_(replay, replay % 4);
    return ReplayTime{.per_call_us = us, .replay_us = us * 64, .calls = 64};
  }
  int fail_at_ = -1;

 private:
  World& world_;
  std::function<double(int, int)> time_;
};

class FakeMonitor final : public ClockMonitor {
 public:
  explicit FakeMonitor(std::function<uint64_t(int)> reasons) : reasons_(std::move(reasons)) {}
  ClockReading Read() override {
    const int read = reads_++;
    return ClockReading{.valid = true, .sm_mhz = 1980, .memory_mhz = 3201, .reasons = reasons_(read)};
  }

 private:
  std::function<uint64_t(int)> reasons_;
  int reads_ = 0;
};

ExperimentConfig Config(Pattern pattern = Pattern::kAbba) {
  return ExperimentConfig{.pattern = pattern,
                          .stopping = StoppingRule{.target_relative_half_width = 0.002,
                                                   .min_rounds = 30,
                                                   .max_rounds = 1000,
                                                   .budget_seconds = 1000,
                                                   .check_every = 10},
                          .check_resamples = 200,
                          .resamples = 1000,
                          .confidence = 0.95,
                          .seed = 42};
}

// Uniform noise in [-amplitude, amplitude], a pure function of the replay index.
double Noise(int replay, double amplitude) {
  SplitMix64 rng(uint64_t(replay) * 7919 + 1);
  return (double(rng.Next() >> 11) / double(1ull << 53) * 2 - 1) * amplitude;
}

TEST(ExperimentTest, ConstantArmsStopAsPreciseAtTheFirstCheck) {
  World world;
  FakeArm a(world, [](int, int) { return 10.0; });
  FakeArm b(world, [](int, int) { return 9.0; });
  const absl::StatusOr<ExperimentResult> r =
      RunExperiment(a, b, nullptr, Config(), [&world] { return world.now; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop, StopReason::kPrecise);
  EXPECT_EQ(r->rounds_run, 30);
  EXPECT_EQ(r->rounds_discarded, 0);
  ASSERT_EQ(r->samples.size(), 120u);
  EXPECT_EQ(r->samples[0].arm, 0);
  EXPECT_EQ(r->samples[1].arm, 1);
  EXPECT_EQ(r->samples[2].arm, 1);
  EXPECT_EQ(r->samples[3].arm, 0);
  EXPECT_EQ(r->samples[5].round, 1);
  EXPECT_EQ(r->samples[5].slot, 1);
  const Analysis& x = r->analysis;
  EXPECT_EQ(x.a.count, 60u);
  EXPECT_EQ(x.a.median, 10.0);
  EXPECT_EQ(x.b.median, 9.0);
  EXPECT_EQ(x.difference.estimate, -1.0);
  EXPECT_EQ(x.difference.ci.low, -1.0);
  EXPECT_EQ(x.difference.ci.high, -1.0);
  EXPECT_EQ(x.relative, -0.1);
  EXPECT_EQ(x.direction, Direction::kFaster);
  ASSERT_EQ(x.rounds.size(), 30u);
  EXPECT_EQ(x.rounds[0].a_us, 10.0);
  EXPECT_EQ(x.rounds[0].b_us, 9.0);
  EXPECT_EQ(x.rounds[0].difference_us, -1.0);
}

TEST(ExperimentTest, NoisyArmsRunUntilTheBudgetEnds) {
  World world;
  FakeArm a(world, [](int replay, int) { return 10.0 + Noise(replay, 2.0); });
  FakeArm b(world, [](int replay, int) { return 10.0 + Noise(replay, 2.0); });
  ExperimentConfig config = Config();
  config.stopping.budget_seconds = 5.0;  // 0.4 s per round: the 13th round ends at 5.2 s
  const absl::StatusOr<ExperimentResult> r = RunExperiment(a, b, nullptr, config, [&world] { return world.now; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop, StopReason::kBudget);
  EXPECT_EQ(r->rounds_run, 13);
  EXPECT_TRUE(r->analysis_status.ok());
  EXPECT_EQ(r->analysis.direction, Direction::kUnresolved);
}

TEST(ExperimentTest, PrecisionStopsARunOnceTheIntervalIsNarrow) {
  World world;
  // 0.5% noise per replay; the target (0.2% of A) needs more than the first check's 30 rounds.
  FakeArm a(world, [](int replay, int) { return 10.0 + Noise(replay, 0.05); });
  FakeArm b(world, [](int replay, int) { return 9.9 + Noise(replay, 0.05); });
  ExperimentConfig config = Config();
  config.stopping.target_relative_half_width = 0.0005;
  const absl::StatusOr<ExperimentResult> r = RunExperiment(a, b, nullptr, config, [&world] { return world.now; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop, StopReason::kPrecise);
  EXPECT_GT(r->rounds_run, 30);
  EXPECT_EQ(r->rounds_run % 10, 0);  // stops only at a check
  EXPECT_LE(r->analysis.difference.ci.half_width() / r->analysis.a.median, 0.0005 * 1.5);
  EXPECT_EQ(r->analysis.direction, Direction::kFaster);
}

TEST(ExperimentTest, MaxRoundsEndsARun) {
  World world;
  FakeArm a(world, [](int replay, int) { return 10.0 + Noise(replay, 2.0); });
  FakeArm b(world, [](int replay, int) { return 10.0 + Noise(replay, 2.0); });
  ExperimentConfig config = Config();
  config.stopping.max_rounds = 37;
  const absl::StatusOr<ExperimentResult> r = RunExperiment(a, b, nullptr, config, [&world] { return world.now; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop, StopReason::kMaxRounds);
  EXPECT_EQ(r->rounds_run, 37);
}

TEST(ExperimentTest, ThrottledRoundsAreFlaggedAndLeftOut) {
  World world;
  // Rounds 3 and 7 run throttled: B takes 100 us there, which must not reach the statistics.
  auto round_of = [](int replay) { return replay / 4; };
  FakeArm a(world, [](int, int) { return 10.0; });
  FakeArm b(world, [&](int replay, int) { return round_of(replay) == 3 || round_of(replay) == 7 ? 100.0 : 9.0; });
  // Two reads per round: round 3's second read, round 7's first; round 5 only idle (kept).
  FakeMonitor monitor([](int read) -> uint64_t {
    if (read == 2 * 3 + 1) return kReasonSwPowerCap;
    if (read == 2 * 7) return kReasonHwThermalSlowdown;
    if (read == 2 * 5) return kReasonGpuIdle;
    return 0;
  });
  const absl::StatusOr<ExperimentResult> r = RunExperiment(a, b, &monitor, Config(), [&world] { return world.now; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rounds_discarded, 2);
  EXPECT_EQ(r->rounds_run, 32);  // 30 kept at the first check
  for (const Sample& s : r->samples) {
    EXPECT_EQ(s.discarded, s.round == 3 || s.round == 7) << "round " << s.round;
    EXPECT_EQ(s.clocks.sm_mhz, 1980u);
  }
  EXPECT_EQ(r->samples[3 * 4].clocks.reasons, kReasonSwPowerCap);
  EXPECT_EQ(r->samples[5 * 4].clocks.reasons, kReasonGpuIdle);
  EXPECT_EQ(r->analysis.b.max, 9.0);
  EXPECT_EQ(r->analysis.difference.estimate, -1.0);
  EXPECT_EQ(r->analysis.rounds.size(), 30u);
}

TEST(ExperimentTest, APositionEffectIsCaughtBySwappingTheSchedule) {
  // Identical arms; whatever runs in the two middle slots of a round is 0.2 us faster.
  auto position = [](int replay, int slot) { return 10.0 + (slot == 1 || slot == 2 ? -0.2 : 0.0) + Noise(replay, 0.01); };
  World world;
  FakeArm a(world, position);
  FakeArm b(world, position);
  const absl::StatusOr<ExperimentResult> abba = RunExperiment(a, b, nullptr, Config(Pattern::kAbba), [&] { return world.now; });
  World world2;
  FakeArm a2(world2, position);
  FakeArm b2(world2, position);
  const absl::StatusOr<ExperimentResult> baab =
      RunExperiment(a2, b2, nullptr, Config(Pattern::kBaab), [&] { return world2.now; });
  ASSERT_TRUE(abba.ok() && baab.ok());
  EXPECT_EQ(abba->analysis.direction, Direction::kFaster);
  EXPECT_EQ(baab->analysis.direction, Direction::kSlower);
  const VerdictInput input{
      .bits_equal = true,
      .bits_detail = "",
      .sound = DifferenceView{abba->analysis.difference.estimate, abba->analysis.difference.ci},
      .swapped = DifferenceView{baab->analysis.difference.estimate, baab->analysis.difference.ci},
      .same_arm = DifferenceView{0, Interval{-0.01, 0.01}}};
  EXPECT_EQ(DecideVerdict(input, "ordinary", "folded").verdict, Verdict::kPositionEffect);
}

TEST(ExperimentTest, AnArmErrorNamesRoundAndSlot) {
  World world;
  FakeArm a(world, [](int, int) { return 10.0; });
  FakeArm b(world, [](int, int) { return 9.0; });
  b.fail_at_ = 5;  // round 1, slot 1
  const absl::StatusOr<ExperimentResult> r = RunExperiment(a, b, nullptr, Config(), [&world] { return world.now; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()), "round 1 slot 1 (arm B): device fell over");
}

TEST(ExperimentTest, TooFewRoundsLeaveNoAnalysis) {
  World world;
  FakeArm a(world, [](int, int) { return 10.0; });
  FakeArm b(world, [](int, int) { return 9.0; });
  ExperimentConfig config = Config();
  config.stopping.budget_seconds = 0.1;  // ends after the first round
  const absl::StatusOr<ExperimentResult> r = RunExperiment(a, b, nullptr, config, [&world] { return world.now; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rounds_run, 1);
  EXPECT_EQ(r->samples.size(), 4u);
  EXPECT_FALSE(r->analysis_status.ok());
  EXPECT_EQ(std::string(r->analysis_status.message()), "1 complete unthrottled rounds: at least 2 are needed for an interval");
}

}  // namespace
}  // namespace mxdiff::bench
