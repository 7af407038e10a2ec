#include "tools/bench/verdict.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

namespace mxdiff::bench {
namespace {

int Sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

std::string Describe(const DifferenceView& view) {
  return fmt::format("{:+.3f} us [{:+.3f}, {:+.3f}]", view.estimate, view.ci.low, view.ci.high);
}

}  // namespace

double NoiseFloorUs(const VerdictInput& input) {
  double floor = input.min_effect_us;
  if (input.same_arm) floor = std::max({floor, std::abs(input.same_arm->ci.low), std::abs(input.same_arm->ci.high)});
  return floor;
}

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFaster:
      return "faster";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kUnresolved:
      return "unresolved";
    case Verdict::kTooNoisy:
      return "too-noisy";
    case Verdict::kPositionEffect:
      return "position-effect";
    case Verdict::kBitMismatch:
      return "bit-mismatch";
    case Verdict::kIncomplete:
      return "incomplete";
  }
  return "?";
}

FinalVerdict DecideVerdict(const VerdictInput& input, std::string_view a_label, std::string_view b_label) {
  if (!input.bits_equal) {
    return {Verdict::kBitMismatch, fmt::format("BIT MISMATCH: {} and {} outputs differ ({}); no speed claim", a_label,
                                               b_label, input.bits_detail)};
  }
  if (!input.sound || !input.swapped || !input.same_arm) {
    std::string missing;
    if (!input.sound) missing += " sound";
    if (!input.swapped) missing += " swapped";
    if (!input.same_arm) missing += " A/A";
    return {Verdict::kIncomplete, fmt::format("no verdict: missing measurement(s):{}", missing)};
  }
  const int sound_sign = Sign(input.sound->estimate);
  const int swapped_sign = Sign(input.swapped->estimate);
  const bool either_resolved = DirectionOf(input.sound->ci) != Direction::kUnresolved ||
                               DirectionOf(input.swapped->ci) != Direction::kUnresolved;
  if (sound_sign != 0 && swapped_sign != 0 && sound_sign != swapped_sign && either_resolved) {
    return {Verdict::kPositionEffect,
            fmt::format("POSITION EFFECT: {} - {} is {} in A B B A but {} in B A A B: the sign follows the position, "
                        "not the arm; no verdict",
                        b_label, a_label, Describe(*input.sound), Describe(*input.swapped))};
  }
  const double floor = NoiseFloorUs(input);
  const Interval& sound = input.sound->ci;
  const std::string beyond = fmt::format("beyond the noise floor of {:.3f} us", floor);
  if (sound.high < -floor) {
    return {Verdict::kFaster, fmt::format("{} is faster than {}: {}, {}", b_label, a_label, Describe(*input.sound), beyond)};
  }
  if (sound.low > floor) {
    return {Verdict::kSlower, fmt::format("{} is slower than {}: {}, {}", b_label, a_label, Describe(*input.sound), beyond)};
  }
  if (DirectionOf(input.same_arm->ci) != Direction::kUnresolved && DirectionOf(sound) != Direction::kUnresolved) {
    return {Verdict::kTooNoisy,
            fmt::format("TOO NOISY: {} - {} is {}, but the A/A control ({} vs itself) shows {}: the difference does not "
                        "lie beyond that noise floor; no verdict",
                        b_label, a_label, Describe(*input.sound), a_label, Describe(*input.same_arm))};
  }
  return {Verdict::kUnresolved, fmt::format("no difference resolved beyond the noise floor of {:.3f} us between {} and "
                                            "{}: {}",
                                            floor, a_label, b_label, Describe(*input.sound))};
}

}  // namespace mxdiff::bench
