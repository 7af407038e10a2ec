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
  EXPECT_EQ(v.message, "folded is faster than ordinary: -1.200 us [-1.300, -1.100]");
  v = DecideVerdict(Clean(D(0.3, 0.1, 0.5), D(0.2, 0.05, 0.4)), "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kSlower);
  EXPECT_EQ(v.message, "folded is slower than ordinary: +0.300 us [+0.100, +0.500]");
  v = DecideVerdict(Clean(D(0.02, -0.1, 0.12), D(0.01, -0.2, 0.2)), "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kUnresolved);
  EXPECT_EQ(v.message, "no difference resolved at this noise between ordinary and folded: +0.020 us [-0.100, +0.120]");
}

TEST(VerdictTest, BitMismatchComesFirst) {
  VerdictInput input = Clean(D(-1.2, -1.3, -1.1), D(-1.1, -1.3, -0.9));
  input.bits_equal = false;
  input.bits_detail = "3 of 6144 elements differ";
  const FinalVerdict v = DecideVerdict(input, "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kBitMismatch);
  EXPECT_EQ(v.message, "BIT MISMATCH: ordinary and folded outputs differ (3 of 6144 elements differ); no speed claim");
}

TEST(VerdictTest, NoisyAAControlGivesNoVerdict) {
  VerdictInput input = Clean(D(-1.2, -1.3, -1.1), D(-1.1, -1.3, -0.9));
  input.same_arm = D(0.2, 0.1, 0.3);
  FinalVerdict v = DecideVerdict(input, "ordinary", "folded");
  EXPECT_EQ(v.verdict, Verdict::kTooNoisy);
  EXPECT_EQ(v.message,
            "TOO NOISY: the A/A control (ordinary vs itself) shows a difference +0.200 us [+0.100, +0.300]; no verdict");
  input.same_arm = D(-0.2, -0.3, -0.01);
  EXPECT_EQ(DecideVerdict(input, "ordinary", "folded").verdict, Verdict::kTooNoisy);
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
