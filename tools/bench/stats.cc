#include "tools/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mxdiff::bench {
namespace {

// x[lo] + frac (x[lo + 1] - x[lo]): the one interpolation formula Quantile and Median share.
double Interpolate(double lower, double upper, double fraction) { return lower + fraction * (upper - lower); }

}  // namespace

double Quantile(std::span<const double> sorted, double q) {
  const size_t n = sorted.size();
  const double h = double(n - 1) * q;
  const size_t lo = size_t(std::floor(h));
  if (lo + 1 >= n) return sorted[n - 1];
  return Interpolate(sorted[lo], sorted[lo + 1], h - double(lo));
}

double Median(std::vector<double> values) {
  const size_t n = values.size();
  const size_t lo = (n - 1) / 2;
  std::nth_element(values.begin(), values.begin() + lo, values.end());
  const double lower = values[lo];
  if (n % 2 == 1) return lower;
  const double upper = *std::min_element(values.begin() + lo + 1, values.end());
  return Interpolate(lower, upper, 0.5);
}

Summary Summarize(std::vector<double> values) {
  Summary summary;
  if (values.empty()) return summary;
  std::sort(values.begin(), values.end());
  summary.count = values.size();
  summary.median = Quantile(values, 0.5);
  summary.p05 = Quantile(values, 0.05);
  summary.p25 = Quantile(values, 0.25);
  summary.p75 = Quantile(values, 0.75);
  summary.p95 = Quantile(values, 0.95);
  summary.min = values.front();
  summary.max = values.back();
  summary.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  return summary;
}

BootstrapResult BootstrapMedian(std::span<const double> values, int resamples, double confidence, uint64_t seed) {
  BootstrapResult result;
  result.estimate = Median(std::vector<double>(values.begin(), values.end()));
  result.resamples = resamples;
  result.confidence = confidence;
  result.seed = seed;
  SplitMix64 rng(seed);
  const size_t n = values.size();
  std::vector<double> draw(n);
  std::vector<double> medians(static_cast<size_t>(resamples));
  for (double& median : medians) {
    for (double& x : draw) x = values[rng.Below(n)];
    median = Median(draw);
  }
  std::sort(medians.begin(), medians.end());
  result.ci = Interval{Quantile(medians, (1 - confidence) / 2), Quantile(medians, (1 + confidence) / 2)};
  return result;
}

Direction DirectionOf(const Interval& difference_ci) {
  if (difference_ci.high < 0) return Direction::kFaster;
  if (difference_ci.low > 0) return Direction::kSlower;
  return Direction::kUnresolved;
}

std::string_view DirectionName(Direction direction) {
  switch (direction) {
    case Direction::kFaster:
      return "faster";
    case Direction::kSlower:
      return "slower";
    case Direction::kUnresolved:
      return "unresolved";
  }
  return "?";
}

}  // namespace mxdiff::bench
