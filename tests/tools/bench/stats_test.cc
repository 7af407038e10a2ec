#include "tools/bench/stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace mxdiff::bench {
namespace {

TEST(QuantileTest, InterpolatesBetweenClosestRanks) {
  const std::vector<double> x = {1, 2, 4, 8};
  EXPECT_EQ(Quantile(x, 0.0), 1.0);
  EXPECT_EQ(Quantile(x, 1.0), 8.0);
  EXPECT_EQ(Quantile(x, 0.5), 3.0);         // h = 1.5
  EXPECT_EQ(Quantile(x, 0.25), 1.75);       // h = 0.75
  EXPECT_EQ(Quantile(x, 0.75), 5.0);        // h = 2.25: 4 + 0.25 * 4
  EXPECT_EQ(Quantile(std::vector<double>{7}, 0.3), 7.0);
}

TEST(MedianTest, MatchesQuantileWithoutSorting) {
  EXPECT_EQ(Median({5, 1, 3}), 3.0);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({-1, -1, 9, 9}), 4.0);
  EXPECT_EQ(Median({2}), 2.0);
  // Values whose midpoint is not exact in binary: the same formula, so the same bits.
  const std::vector<double> odd = {0.1, 0.7, 0.3, 0.9};
  std::vector<double> sorted = {0.1, 0.3, 0.7, 0.9};
  EXPECT_EQ(Median(odd), Quantile(sorted, 0.5));
}

TEST(SummarizeTest, OrderStatisticsAndMean) {
  const Summary s = Summarize({10, 20, 30, 40, 50});
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.median, 30.0);
  EXPECT_EQ(s.p25, 20.0);
  EXPECT_EQ(s.p75, 40.0);
  EXPECT_EQ(s.p05, 12.0);  // h = 0.2
  EXPECT_EQ(s.p95, 48.0);  // h = 3.8
  EXPECT_EQ(s.min, 10.0);
  EXPECT_EQ(s.max, 50.0);
  EXPECT_EQ(s.mean, 30.0);
  EXPECT_EQ(s.iqr(), 20.0);
  EXPECT_EQ(Summarize({}).count, 0u);
}

// Expected values computed independently (Python, the algorithm as stats.h states it).
TEST(BootstrapTest, ReproducesIndependentComputation) {
  std::vector<double> ten;
  for (int i = 1; i <= 10; ++i) ten.push_back(i);
  const BootstrapResult a = BootstrapMedian(ten, 1000, 0.95, 12345);
  EXPECT_EQ(a.estimate, 5.5);
  EXPECT_EQ(a.ci.low, 2.9875000000000114);
  EXPECT_EQ(a.ci.high, 8.0);
  EXPECT_EQ(a.seed, 12345u);
  EXPECT_EQ(a.resamples, 1000);

  const BootstrapResult b = BootstrapMedian(std::vector<double>{0.5, -1.25, 2.0, 3.5, -0.75}, 200, 0.9, 7);
  EXPECT_EQ(b.estimate, 0.5);
  EXPECT_EQ(b.ci.low, -0.75);
  EXPECT_EQ(b.ci.high, 3.5);

  const BootstrapResult c = BootstrapMedian(
      std::vector<double>{-0.31, -0.12, -0.27, -0.05, -0.22, -0.40, 0.03, -0.18}, 500, 0.95, 20261202);
  EXPECT_EQ(c.estimate, -0.2);
  EXPECT_EQ(c.ci.low, -0.31);
  EXPECT_EQ(c.ci.high, -0.05);
}

TEST(BootstrapTest, ConstantValuesGiveAPointInterval) {
  const BootstrapResult r = BootstrapMedian(std::vector<double>(17, -0.25), 300, 0.95, 99);
  EXPECT_EQ(r.estimate, -0.25);
  EXPECT_EQ(r.ci.low, -0.25);
  EXPECT_EQ(r.ci.high, -0.25);
  EXPECT_EQ(r.ci.half_width(), 0.0);
}

TEST(BootstrapTest, SameSeedSameIntervalOtherSeedOther) {
  std::vector<double> values;
  SplitMix64 rng(5);
  for (int i = 0; i < 101; ++i) values.push_back(double(rng.Next() % 1000) / 7);
  const BootstrapResult a = BootstrapMedian(values, 2000, 0.95, 1);
  const BootstrapResult b = BootstrapMedian(values, 2000, 0.95, 1);
  const BootstrapResult c = BootstrapMedian(values, 2000, 0.95, 2);
  EXPECT_EQ(a.ci.low, b.ci.low);
  EXPECT_EQ(a.ci.high, b.ci.high);
  EXPECT_TRUE(a.ci.low != c.ci.low || a.ci.high != c.ci.high);
  EXPECT_TRUE(a.ci.Contains(a.estimate));
}

// Coverage: on data with a known median, the 95% interval contains it in about 95% of
// experiments (fixed seeds: a deterministic check of the method, not a flaky one).
TEST(BootstrapTest, CoversTheTrueMedian) {
  int covered = 0;
  constexpr int kExperiments = 400;
  SplitMix64 rng(20261204);
  for (int e = 0; e < kExperiments; ++e) {
    std::vector<double> values(61);
    // Uniform on [-1, 1] plus a shift of 0.3: the true median is 0.3.
    for (double& v : values) v = 0.3 + (double(rng.Next() >> 11) / double(1ull << 53)) * 2 - 1;
    covered += BootstrapMedian(values, 1000, 0.95, rng.Next()).ci.Contains(0.3) ? 1 : 0;
  }
  EXPECT_GE(covered, int(0.90 * kExperiments));
  EXPECT_LE(covered, int(0.99 * kExperiments));
}

TEST(DirectionTest, FromTheInterval) {
  EXPECT_EQ(DirectionOf({-2, -0.1}), Direction::kFaster);
  EXPECT_EQ(DirectionOf({0.1, 2}), Direction::kSlower);
  EXPECT_EQ(DirectionOf({-0.1, 0.1}), Direction::kUnresolved);
  EXPECT_EQ(DirectionOf({0, 1}), Direction::kUnresolved);  // touching zero resolves nothing
  EXPECT_EQ(DirectionOf({-1, 0}), Direction::kUnresolved);
  EXPECT_EQ(DirectionName(Direction::kFaster), "faster");
  EXPECT_EQ(DirectionName(Direction::kSlower), "slower");
  EXPECT_EQ(DirectionName(Direction::kUnresolved), "unresolved");
}

}  // namespace
}  // namespace mxdiff::bench
