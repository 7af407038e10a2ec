// The tune-on-first-use runner mode on the CPU: which tactic a call gets (pinned, cached, the
// table's, tuned now, or the fallback inside a capture), with a fake runner and a fake tuner.
#include "kernels/tune_on_first_use.h"

#include "gtest/gtest.h"
#include "tests/kernels/fake_gemm_runner.h"

namespace mxdiff {
namespace {

constexpr Tactic kTable{8, 128, 64, 16, 0};
constexpr Tactic kWinner{8, 128, 64, 8, 1};
constexpr Tactic kPinned{16, 128, 32, 4, 0};

TEST(DecideFirstUseTest, EveryCase) {
  const std::optional<Tactic> none;
  using S = FirstUseSource;
  for (FirstUse mode : {FirstUse::kTable, FirstUse::kTune}) {
    for (bool capturing : {false, true}) {
      const FirstUseDecision pinned = DecideFirstUse(mode, kPinned, kWinner, kTable, kGenericTactic, capturing);
      EXPECT_EQ(pinned.source, S::kPinned);
      EXPECT_EQ(pinned.tactic, kPinned);
      const FirstUseDecision cached = DecideFirstUse(mode, none, kWinner, kTable, kGenericTactic, capturing);
      EXPECT_EQ(cached.source, S::kCached);
      EXPECT_EQ(cached.tactic, kWinner);
    }
  }
  EXPECT_EQ(DecideFirstUse(FirstUse::kTable, none, none, kTable, kGenericTactic, true).source, S::kTable);
  EXPECT_EQ(DecideFirstUse(FirstUse::kTable, none, none, kTable, kGenericTactic, false).tactic, kTable);
  EXPECT_EQ(DecideFirstUse(FirstUse::kTune, none, none, kTable, kGenericTactic, false).source, S::kTuneNow);
  const FirstUseDecision in_capture = DecideFirstUse(FirstUse::kTune, none, none, kTable, kGenericTactic, true);
  EXPECT_EQ(in_capture.source, S::kFallback);
  EXPECT_EQ(in_capture.tactic, kGenericTactic);
}

TEST(FirstUseNameTest, ParsesBothModes) {
  EXPECT_EQ(ParseFirstUse("tune"), FirstUse::kTune);
  EXPECT_EQ(ParseFirstUse("table"), FirstUse::kTable);
  EXPECT_FALSE(ParseFirstUse("Tune").has_value());
  EXPECT_EQ(FirstUseName(FirstUse::kTune), "tune");
}

class TuneOnFirstUseRunnerTest : public ::testing::Test {
 protected:
  void Make(FirstUse mode, std::optional<Tactic> fallback = kGenericTactic) {
    auto fake = std::make_unique<testing::FakeGemmRunner>(kTable, kWinner);
    fake_ = fake.get();
    runner_ = std::make_unique<TuneOnFirstUseRunner>(
        std::move(fake), TuneOnFirstUseOptions{.mode = mode,
                                               .fallback = fallback,
                                               .capturing = [this](void*) { return capturing_; }});
    layer_ = *runner_->Prepare(6, 1024, 4096, {}, {});
  }
  absl::StatusOr<Route> Call(std::optional<Tactic> tactic = std::nullopt) {
    const DeviceBatch batch{.row_offsets = offsets_};
    return runner_->RunOnDevice(*layer_, batch, RunRequest{.tactic = tactic});
  }

  testing::FakeGemmRunner* fake_ = nullptr;
  std::unique_ptr<TuneOnFirstUseRunner> runner_;
  std::unique_ptr<PreparedLayer> layer_;
  std::vector<int32_t> offsets_{0, 1, 2, 3, 4, 5, 6};
  bool capturing_ = false;
};

// The seed's sequence: A captured at its first use, A run once outside a capture, B captured.
TEST_F(TuneOnFirstUseRunnerTest, TuneModeGivesTheFirstCaptureTheFallbackAndTheSecondTheWinner) {
  Make(FirstUse::kTune);
  capturing_ = true;
  ASSERT_EQ(Call()->tactic, kGenericTactic);  // A's capture: cannot tune
  EXPECT_EQ(fake_->tunings, 0);
  capturing_ = false;
  ASSERT_EQ(Call()->tactic, kWinner);  // first call outside a capture: tunes
  EXPECT_EQ(fake_->tunings, 1);
  capturing_ = true;
  ASSERT_EQ(Call()->tactic, kWinner);  // B's capture: the cached winner
  capturing_ = false;
  ASSERT_EQ(Call()->tactic, kWinner);
  EXPECT_EQ(fake_->tunings, 1);  // tuned once
  EXPECT_EQ(runner_->DefaultTactic(1024, 4096, offsets_), kWinner);
  ASSERT_EQ(runner_->events().size(), 4u);
  EXPECT_EQ(runner_->events()[0].source, FirstUseSource::kFallback);
  EXPECT_EQ(runner_->events()[1].source, FirstUseSource::kTuneNow);
  EXPECT_EQ(runner_->events()[2].source, FirstUseSource::kCached);
  EXPECT_EQ(fake_->launched, (std::vector<Tactic>{kGenericTactic, kWinner, kWinner, kWinner}));
}

TEST_F(TuneOnFirstUseRunnerTest, TuneModeWithTheTableAsFallback) {
  Make(FirstUse::kTune, std::nullopt);
  capturing_ = true;
  EXPECT_EQ(Call()->tactic, kTable);
  EXPECT_EQ(fake_->tunings, 0);
}

TEST_F(TuneOnFirstUseRunnerTest, TableModeNeverTunes) {
  Make(FirstUse::kTable);
  for (bool capturing : {true, false, true}) {
    capturing_ = capturing;
    EXPECT_EQ(Call()->tactic, kTable);
  }
  EXPECT_EQ(fake_->tunings, 0);
  EXPECT_EQ(runner_->DefaultTactic(1024, 4096, offsets_), kTable);
}

TEST_F(TuneOnFirstUseRunnerTest, APinnedTacticPassesThroughInEveryMode) {
  for (FirstUse mode : {FirstUse::kTable, FirstUse::kTune}) {
    Make(mode);
    for (bool capturing : {true, false}) {
      capturing_ = capturing;
      EXPECT_EQ(Call(kPinned)->tactic, kPinned);
    }
    EXPECT_EQ(fake_->tunings, 0);
    EXPECT_TRUE(runner_->events().empty());
  }
}

TEST_F(TuneOnFirstUseRunnerTest, FirstUseOfAnotherShapeTunesAgain) {
  Make(FirstUse::kTune);
  ASSERT_TRUE(Call().ok());
  offsets_ = {0, 2, 4, 6, 8, 10, 12};  // 2 rows per expert: another dispatch shape
  ASSERT_TRUE(Call().ok());
  EXPECT_EQ(fake_->tunings, 2);
}

TEST_F(TuneOnFirstUseRunnerTest, AFailedTuningIsTheCallsErrorAndCachesNothing) {
  Make(FirstUse::kTune);
  fake_->fail_tuning = true;
  absl::StatusOr<Route> failed = Call();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("fake tuner failed"), std::string_view::npos);
  EXPECT_TRUE(fake_->launched.empty());
  fake_->fail_tuning = false;
  EXPECT_EQ(Call()->tactic, kWinner);
  EXPECT_EQ(fake_->tunings, 2);
}

TEST_F(TuneOnFirstUseRunnerTest, BadRowOffsetsAreTheInnerRunnersErrorWithoutTuning) {
  Make(FirstUse::kTune);
  offsets_ = {0, 1};
  EXPECT_EQ(Call().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_->tunings, 0);
}

}  // namespace
}  // namespace mxdiff
