// The naive protocol's answer changes with the runner mode while the sound protocol's does not,
// on the CPU: the naive protocol's real order of steps (PrepareNaiveArms) and the real statistics
// (RunExperiment) over fake graph arms that launch through a TuneOnFirstUseRunner around a fake
// runner. A graph's time is that of the tactic it captured: the generic unsplit tactic takes 2x
// the split one (the seed's 95 vs 53 us), folded takes 0.97x ordinary, and the fake tuner
// picks the table's tactic (as the H200's tuner did).
#include <cmath>

#include "gtest/gtest.h"
#include "kernels/tune_on_first_use.h"
#include "tests/kernels/fake_gemm_runner.h"
#include "tools/bench/naive_protocol.h"

namespace mxdiff::bench {
namespace {

constexpr Tactic kTable{8, 128, 64, 16, 0};

struct Machine {
  bool capturing = false;
  double now = 0;
  int replays = 0;
};

double TacticMicroseconds(const Tactic& tactic) { return tactic.splits == 1 ? 90.0 : 45.0; }

class FakeGraphArm final : public BenchArm {
 public:
  FakeGraphArm(std::string label, GemmRunner& runner, Machine& machine, RunRequest request)
      : label_(std::move(label)), runner_(runner), machine_(machine), request_(request) {
    layer_ = *runner_.Prepare(6, 1024, 4096, {}, {});
  }
  std::string label() const override { return label_; }
  std::string route() const override { return route_; }
  absl::StatusOr<std::vector<uint16_t>> RunSet(int) override {
    absl::StatusOr<Tactic> tactic = Launch();
    if (!tactic.ok()) return tactic.status();
    return std::vector<uint16_t>(6 * 1024, 0);
  }
  absl::Status WarmUp(int passes) override {
    for (int i = 0; i < passes; ++i) {
      if (absl::StatusOr<Tactic> tactic = Launch(); !tactic.ok()) return tactic.status();
    }
    return absl::OkStatus();
  }
  absl::Status PrepareTiming(int, bool) override {
    machine_.capturing = true;
    absl::StatusOr<Tactic> tactic = Launch();
    machine_.capturing = false;
    if (!tactic.ok()) return tactic.status();
    captured_ = *tactic;
    return absl::OkStatus();
  }
  absl::StatusOr<ReplayTime> TimeReplay() override {
    if (!captured_) return absl::FailedPreconditionError("not captured");
    const int replay = machine_.replays++;
    machine_.now += 0.001;
    const double factor = request_.transform == TransformRequest::kFolded ? 0.97 : 1.0;
    const double us = TacticMicroseconds(*captured_) * factor + 0.01 * std::sin(replay * 0.7);
    return ReplayTime{.per_call_us = us, .replay_us = us * 32, .calls = 32};
  }
  absl::StatusOr<std::vector<uint16_t>> LastOutput() override { return std::vector<uint16_t>(6 * 1024, 0); }
  int last_set() const override { return 0; }
  std::optional<Tactic> captured() const { return captured_; }

 private:
  absl::StatusOr<Tactic> Launch() {
    const DeviceBatch batch{.row_offsets = offsets_};
    absl::StatusOr<Route> route = runner_.RunOnDevice(*layer_, batch, request_);
    if (!route.ok()) return route.status();
    route_ = TacticName(route->tactic);
    return route->tactic;
  }
  std::string label_;
  GemmRunner& runner_;
  Machine& machine_;
  RunRequest request_;
  std::unique_ptr<PreparedLayer> layer_;
  std::vector<int32_t> offsets_{0, 1, 2, 3, 4, 5, 6};
  std::string route_ = "(not run)";
  std::optional<Tactic> captured_;
};

std::unique_ptr<TuneOnFirstUseRunner> MakeRunner(FirstUse mode, Machine& machine) {
  return std::make_unique<TuneOnFirstUseRunner>(
      std::make_unique<testing::FakeGemmRunner>(kTable, /*winner=*/kTable),
      TuneOnFirstUseOptions{.mode = mode,
                            .fallback = kGenericTactic,
                            .capturing = [&machine](void*) { return machine.capturing; }});
}

RunRequest Unpinned(TransformRequest transform) {
  return RunRequest{.transform = transform, .policy = FallbackPolicy::kFallback, .tactic = std::nullopt};
}

double Difference(BenchArm& a, BenchArm& b, Machine& machine) {
  const ExperimentConfig config{.pattern = Pattern::kAbba,
                                .stopping = StoppingRule{.target_relative_half_width = 1e-9,
                                                         .min_rounds = 20,
                                                         .max_rounds = 40,
                                                         .budget_seconds = 1000,
                                                         .check_every = 10},
                                .check_resamples = 100,
                                .resamples = 500,
                                .confidence = 0.95,
                                .seed = 7};
  absl::StatusOr<ExperimentResult> result = RunExperiment(a, b, nullptr, config, [&machine] { return machine.now; });
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->analysis_status.ok()) << result->analysis_status;
  return result->analysis.difference.estimate;
}

// The naive protocol as the driver runs it: table mode on two runners, tune mode on one.
struct NaiveOutcome {
  NaivePreparation preparation;
  double difference = 0;
};
NaiveOutcome Naive(FirstUse mode) {
  Machine machine;
  std::unique_ptr<TuneOnFirstUseRunner> runner_a = MakeRunner(mode, machine);
  std::unique_ptr<TuneOnFirstUseRunner> runner_b = mode == FirstUse::kTable ? MakeRunner(mode, machine) : nullptr;
  GemmRunner& b_runner = runner_b ? *runner_b : *runner_a;
  FakeGraphArm a("ordinary", *runner_a, machine, Unpinned(TransformRequest::kOrdinary));
  FakeGraphArm b("folded", b_runner, machine, Unpinned(TransformRequest::kFolded));
  auto layer = b_runner.Prepare(6, 1024, 4096, {}, {});
  const std::vector<int32_t> offsets{0, 1, 2, 3, 4, 5, 6};
  absl::StatusOr<NaivePreparation> prepared =
      PrepareNaiveArms(mode, a, b, [&] { return b_runner.Tune(**layer, offsets); });
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  return {*prepared, Difference(a, b, machine)};
}

// The sound protocol's steps: the tactic chosen once (the runner's default) and pinned for both
// arms; both run first, warm up, and are captured, A first.
double Sound(FirstUse mode, int* tunings) {
  Machine machine;
  std::unique_ptr<TuneOnFirstUseRunner> runner = MakeRunner(mode, machine);
  const Tactic pinned = runner->DefaultTactic(1024, 4096, std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6});
  FakeGraphArm a("ordinary", *runner, machine,
                 RunRequest{.transform = TransformRequest::kOrdinary, .policy = FallbackPolicy::kFailClosed, .tactic = pinned});
  FakeGraphArm b("folded", *runner, machine,
                 RunRequest{.transform = TransformRequest::kFolded, .policy = FallbackPolicy::kFailClosed, .tactic = pinned});
  for (BenchArm* arm : {static_cast<BenchArm*>(&a), static_cast<BenchArm*>(&b)}) {
    EXPECT_TRUE(arm->RunSet(0).ok());
  }
  for (BenchArm* arm : {static_cast<BenchArm*>(&a), static_cast<BenchArm*>(&b)}) {
    EXPECT_TRUE(arm->WarmUp(2).ok());
    EXPECT_TRUE(arm->PrepareTiming(1, true).ok());
  }
  EXPECT_EQ(a.captured(), kTable);
  EXPECT_EQ(b.captured(), kTable);
  *tunings = runner->tunings();
  return Difference(a, b, machine);
}

TEST(FirstUseProtocolTest, NaiveAnswerChangesWithTuneOnFirstUse) {
  const NaiveOutcome table = Naive(FirstUse::kTable);
  EXPECT_EQ(table.preparation.a_route, TacticName(kTable));
  EXPECT_EQ(table.preparation.b_route, TacticName(kTable));
  EXPECT_NEAR(table.difference, -1.35, 0.05);  // 45 -> 43.65: the folded effect alone

  const NaiveOutcome tune = Naive(FirstUse::kTune);
  EXPECT_EQ(tune.preparation.a_route, TacticName(kGenericTactic));  // captured before tuning
  EXPECT_EQ(tune.preparation.b_route, TacticName(kTable));          // the tuner's winner
  EXPECT_NE(tune.preparation.tuning.find("tuned the shape at its first use"), std::string::npos);
  EXPECT_NEAR(tune.difference, -46.35, 0.05);  // 90 -> 43.65: the seed's kind of artifact
}

TEST(FirstUseProtocolTest, SoundAnswerDoesNotChange) {
  int table_tunings = -1;
  int tune_tunings = -1;
  const double table = Sound(FirstUse::kTable, &table_tunings);
  const double tune = Sound(FirstUse::kTune, &tune_tunings);
  EXPECT_NEAR(table, -1.35, 0.05);
  EXPECT_DOUBLE_EQ(table, tune);
  EXPECT_EQ(table_tunings, 0);
  EXPECT_EQ(tune_tunings, 0);  // every request was pinned: the mode never ran the tuner
}

TEST(FirstUseProtocolTest, AFailingStepIsNamed) {
  Machine machine;
  std::unique_ptr<TuneOnFirstUseRunner> runner = MakeRunner(FirstUse::kTable, machine);
  FakeGraphArm a("ordinary", *runner, machine, Unpinned(TransformRequest::kOrdinary));
  FakeGraphArm b("folded", *runner, machine, Unpinned(TransformRequest::kFolded));
  absl::StatusOr<NaivePreparation> prepared =
      PrepareNaiveArms(FirstUse::kTable, a, b, [] { return absl::StatusOr<Tactic>(absl::InternalError("no device")); });
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().message(), "tuning: no device");
}

}  // namespace
}  // namespace mxdiff::bench
