#include "gtest/gtest.h"
#include "tools/bench/schedule.h"
#include "tools/bench/stopping.h"

namespace mxdiff::bench {
namespace {

TEST(ScheduleTest, Slots) {
  EXPECT_EQ(Slots(Pattern::kAbba), (std::array<int, 4>{0, 1, 1, 0}));
  EXPECT_EQ(Slots(Pattern::kBaab), (std::array<int, 4>{1, 0, 0, 1}));
  EXPECT_EQ(PatternName(Pattern::kAbba), "ABBA");
  EXPECT_EQ(PatternName(Pattern::kBaab), "BAAB");
  EXPECT_EQ(ParsePattern("ABBA"), Pattern::kAbba);
  EXPECT_EQ(ParsePattern("BAAB"), Pattern::kBaab);
  EXPECT_EQ(ParsePattern("ABAB"), std::nullopt);
}

TEST(ScheduleTest, RoundDifferenceIsBMinusA) {
  // ABBA: A = 10 and 12, B = 9 and 9.5.
  EXPECT_EQ(RoundDifference(Pattern::kAbba, {10, 9, 9.5, 12}), -1.75);
  // BAAB: B = 9 and 9.5, A = 10 and 12.
  EXPECT_EQ(RoundDifference(Pattern::kBaab, {9, 10, 12, 9.5}), -1.75);
}

TEST(ScheduleTest, LinearDriftCancelsInABBA) {
  // Both arms equal, every slot 0.5 slower than the one before: no difference is left.
  EXPECT_EQ(RoundDifference(Pattern::kAbba, {10, 10.5, 11, 11.5}), 0.0);
  EXPECT_EQ(RoundDifference(Pattern::kBaab, {10, 10.5, 11, 11.5}), 0.0);
}

TEST(ScheduleTest, APositionEffectFlipsSignBetweenSchedules) {
  // The middle slots are 1 faster whichever arm holds them.
  EXPECT_EQ(RoundDifference(Pattern::kAbba, {10, 9, 9, 10}), -1.0);
  EXPECT_EQ(RoundDifference(Pattern::kBaab, {10, 9, 9, 10}), 1.0);
}

TEST(StoppingTest, Decide) {
  const StoppingRule rule{.target_relative_half_width = 0.002,
                          .min_rounds = 30,
                          .max_rounds = 500,
                          .budget_seconds = 10,
                          .check_every = 10};
  EXPECT_EQ(Decide(rule, 5, 5, 1.0, std::nullopt), StopReason::kContinue);
  EXPECT_EQ(Decide(rule, 30, 30, 1.0, 0.003), StopReason::kContinue);
  EXPECT_EQ(Decide(rule, 30, 30, 1.0, 0.002), StopReason::kPrecise);   // at the target
  EXPECT_EQ(Decide(rule, 29, 29, 1.0, 0.0001), StopReason::kContinue);  // precise but too few rounds
  EXPECT_EQ(Decide(rule, 40, 45, 1.0, std::nullopt), StopReason::kContinue);
  EXPECT_EQ(Decide(rule, 3, 3, 10.0, std::nullopt), StopReason::kBudget);
  EXPECT_EQ(Decide(rule, 300, 300, 12.0, 0.0001), StopReason::kBudget);  // the budget is checked first
  EXPECT_EQ(Decide(rule, 100, 500, 5.0, 0.01), StopReason::kMaxRounds);
  EXPECT_EQ(Decide(rule, 100, 499, 5.0, 0.01), StopReason::kContinue);
  EXPECT_EQ(StopReasonName(StopReason::kPrecise), "precise");
  EXPECT_EQ(StopReasonName(StopReason::kBudget), "budget");
  EXPECT_EQ(StopReasonName(StopReason::kMaxRounds), "max-rounds");
  EXPECT_EQ(StopReasonName(StopReason::kContinue), "continue");
}

TEST(StoppingTest, ShouldCheck) {
  const StoppingRule rule{.min_rounds = 30, .check_every = 10};
  EXPECT_FALSE(ShouldCheck(rule, 29, 0));
  EXPECT_TRUE(ShouldCheck(rule, 30, 0));
  EXPECT_FALSE(ShouldCheck(rule, 39, 30));
  EXPECT_TRUE(ShouldCheck(rule, 40, 30));
  const StoppingRule tiny{.min_rounds = 0, .check_every = 0};
  EXPECT_FALSE(ShouldCheck(tiny, 1, 0));  // an interval needs two rounds
  EXPECT_TRUE(ShouldCheck(tiny, 2, 0));
  EXPECT_TRUE(ShouldCheck(tiny, 3, 2));
}

}  // namespace
}  // namespace mxdiff::bench
