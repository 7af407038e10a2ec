#include "tools/bench/verdict.h"

#include "gtest/gtest.h"

namespace mxdiff::bench {
namespace {

DifferenceView D(double estimate, double low, double high) { return DifferenceView{estimate, Interval{low, high}}; }

VerdictInput Clean(DifferenceView sound, DifferenceView swapped) {
  return VerdictInput{.bits_equal = true, .bits_detail = "", .sound = sound, .swapped = swapped, .same_arm = D(0.01, -0.05, 0.06)};
}

TEST(VerdictTest, FasterSlowerUnresolved) {
  FinalVerdict v = DecideVerdict(Clean(D(-1.2, -1.3, -1.1), D(-1.1, -1.3, -0.9)), "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kFaster);
  EXPECT_EQ(v.message,
            "folded is faster than ordinary: -1.200 us [-1.300, -1.100], beyond the noise floor of 0.060 us");
  v = DecideVerdict(Clean(D(0.3, 0.1, 0.5), D(0.2, 0.05, 0.4)), "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kSlower);
  EXPECT_EQ(v.message,
            "folded is slower than ordinary: +0.300 us [+0.100, +0.500], beyond the noise floor of 0.060 us");
  v = DecideVerdict(Clean(D(0.02, -0.1, 0.12), D(0.01, -0.2, 0.2)), "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kUnresolved);
  EXPECT_EQ(v.message,
            "no difference resolved beyond the noise floor of 0.060 us between ordinary and folded: +0.020 us [-0.100, "
            "+0.120]");
}

TEST(VerdictTest, BitMismatchComesFirst) {
  VerdictInput input = Clean(D(-1.2, -1.3, -1.1), D(-1.1, -1.3, -0.9));
  input.bits_equal = false;
  input.bits_detail = "3 of 6144 elements differ";
  const FinalVerdict v = DecideVerdict(input, "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kBitMismatch);
  EXPECT_EQ(v.message, "BIT MISMATCH: ordinary and folded outputs differ (3 of 6144 elements differ); no speed claim");
}

TEST(VerdictTest, ResolvedAAControlIsTheNoiseFloor) {
  // Measured on the H200 (W2 PP2xTP4): the A/A control resolved a tiny bias; the effect is far
  // beyond it, so there is a verdict.
  VerdictInput input = Clean(D(-0.592, -0.602, -0.587), D(-0.590, -0.600, -0.580));
  input.same_arm = D(-0.009, -0.017, -0.001);
  FinalVerdict v = DecideVerdict(input, "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kFaster);
  EXPECT_EQ(v.message,
            "folded is faster than ordinary: -0.592 us [-0.602, -0.587], beyond the noise floor of 0.017 us");
  EXPECT_DOUBLE_EQ(NoiseFloorUs(input), 0.017);
  // The same A/A bias swallows an effect of its own size: no verdict.
  input.sound = D(-0.012, -0.015, -0.008);
  v = DecideVerdict(input, "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kTooNoisy);
  EXPECT_EQ(v.message,
            "TOO NOISY: folded - ordinary is -0.012 us [-0.015, -0.008], but the A/A control (ordinary vs itself) "
            "shows -0.009 us [-0.017, -0.001]: the difference does not lie beyond that noise floor; no verdict");
  // An interval that reaches into the floor on one side is not beyond it.
  input.sound = D(0.2, 0.01, 0.4);
  input.swapped = D(0.2, 0.01, 0.4);
  EXPECT_EQ(DecideVerdict(input, "ordinary", "folded").verdict, Verdict::kTooNoisy);
  input.sound = D(0.2, 0.018, 0.4);
  EXPECT_EQ(DecideVerdict(input, "ordinary", "folded").verdict, Verdict::kSlower);
}

TEST(VerdictTest, MinimumEffectRaisesTheFloor) {
  VerdictInput input = Clean(D(-0.05, -0.07, -0.03), D(-0.05, -0.07, -0.03));
  input.same_arm = D(0.0, -0.01, 0.01);
  EXPECT_EQ(DecideVerdict(input, "a", "b").verdict, Verdict::kFaster);
  input.min_effect_us = 0.1;
  EXPECT_DOUBLE_EQ(NoiseFloorUs(input), 0.1);
  const FinalVerdict v = DecideVerdict(input, "a", "b");
  EXPECT_EQ(v.verdict, Verdict::kUnresolved);
  EXPECT_EQ(v.message, "no difference resolved beyond the noise floor of 0.100 us between a and b: -0.050 us [-0.070, -0.030]");
  input.sound = D(-0.2, -0.25, -0.15);
  EXPECT_EQ(DecideVerdict(input, "a", "b").verdict, Verdict::kFaster);
}

TEST(VerdictTest, SignFollowingThePositionGivesNoVerdict) {
  // Resolved in A B B A, the opposite sign in B A A B (resolved or not).
  FinalVerdict v = DecideVerdict(Clean(D(-1.0, -1.1, -0.9), D(1.0, 0.9, 1.1)), "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kPositionEffect);
  EXPECT_EQ(v.message,
            "POSITION EFFECT: folded - ordinary is -1.000 us [-1.100, -0.900] in A B B A but +1.000 us [+0.900, "
            "+1.100] in B A A B: the sign follows the position, not the arm; no verdict");
  EXPECT_EQ(DecideVerdict(Clean(D(-1.0, -1.1, -0.9), D(0.1, -0.2, 0.4)), "a", "b").verdict, Verdict::kPositionEffect);
  EXPECT_EQ(DecideVerdict(Clean(D(0.1, -0.2, 0.4), D(-1.0, -1.1, -0.9)), "a", "b").verdict, Verdict::kPositionEffect);
  // Opposite signs, neither resolved: nothing resolved either way.
  EXPECT_EQ(DecideVerdict(Clean(D(0.1, -0.2, 0.4), D(-0.1, -0.4, 0.2)), "a", "b").verdict, Verdict::kUnresolved);
  // A zero estimate has no sign.
  EXPECT_EQ(DecideVerdict(Clean(D(-1.0, -1.1, -0.9), D(0.0, -0.2, 0.2)), "a", "b").verdict, Verdict::kFaster);
}

TEST(VerdictTest, MissingMeasurementsAreIncomplete) {
  VerdictInput input = Clean(D(-1.0, -1.1, -0.9), D(-1.0, -1.1, -0.9));
  input.same_arm.reset();
  input.swapped.reset();
  const FinalVerdict v = DecideVerdict(input, "a", "b");
  EXPECT_EQ(v.verdict, Verdict::kIncomplete);
  EXPECT_EQ(v.message, "no verdict: missing measurement(s): swapped A/A");
}

TEST(VerdictTest, Names) {
  EXPECT_EQ(VerdictName(Verdict::kFaster), "faster");
  EXPECT_EQ(VerdictName(Verdict::kSlower), "slower");
  EXPECT_EQ(VerdictName(Verdict::kUnresolved), "unresolved");
  EXPECT_EQ(VerdictName(Verdict::kTooNoisy), "too-noisy");
  EXPECT_EQ(VerdictName(Verdict::kPositionEffect), "position-effect");
  EXPECT_EQ(VerdictName(Verdict::kBitMismatch), "bit-mismatch");
  EXPECT_EQ(VerdictName(Verdict::kIncomplete), "incomplete");
}

}  // namespace
}  // namespace mxdiff::bench
