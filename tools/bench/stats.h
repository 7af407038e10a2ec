// The statistics of a paired A/B timing: order statistics, summaries, a seeded generator whose
// stream anyone can recompute (SplitMix64), and the percentile bootstrap of a median. CUDA-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "reference/hash.h"  // SplitMix64: the bootstrap's stream, recomputable from the printed seed

namespace mxdiff::bench {

// Quantile q in [0, 1] of ascending `sorted` by linear interpolation between closest ranks
// (R's type 7, NumPy's default): h = (n - 1) q, x[floor h] + (h - floor h) (x[floor h + 1] -
// x[floor h]). `sorted` must not be empty.
double Quantile(std::span<const double> sorted, double q);

// Quantile(sorted values, 0.5), computed in O(n) without sorting (same formula, same bits).
double Median(std::vector<double> values);

struct Summary {
  size_t count = 0;
  double median = 0;
  double p05 = 0;
  double p25 = 0;
  double p75 = 0;
  double p95 = 0;
  double min = 0;
  double max = 0;
  double mean = 0;

  double iqr() const { return p75 - p25; }
};

// All zero for an empty input.
Summary Summarize(std::vector<double> values);

struct Interval {
  double low = 0;
  double high = 0;

  double half_width() const { return (high - low) / 2; }
  bool Contains(double x) const { return low <= x && x <= high; }
};

struct BootstrapResult {
  double estimate = 0;  // the median of the values themselves
  Interval ci;          // percentile interval of the resampled medians
  int resamples = 0;
  double confidence = 0;
  uint64_t seed = 0;
};

// Percentile bootstrap of the median: `resamples` times, values.size() draws with replacement
// (index SplitMix64(seed).Below(n), in order), the median of each; the interval is the
// Quantile((1 - confidence) / 2) and Quantile((1 + confidence) / 2) of the sorted medians.
// `values` must not be empty and resamples >= 1.
BootstrapResult BootstrapMedian(std::span<const double> values, int resamples, double confidence, uint64_t seed);

// What the interval of (B - A) says about arm B: faster (entirely below 0), slower (entirely
// above 0) or unresolved (contains 0: no difference resolved at this noise).
enum class Direction : uint8_t { kFaster = 0, kSlower = 1, kUnresolved = 2 };
Direction DirectionOf(const Interval& difference_ci);
std::string_view DirectionName(Direction direction);  // "faster", "slower", "unresolved"

}  // namespace mxdiff::bench
