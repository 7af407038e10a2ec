// The verdict of a comparison from its sound measurement and its two controls. A bit change
// forbids any speed claim; a difference whose sign follows the schedule position (A B B A vs
// B A A B) rather than the arm is a position effect. Only then does the sound interval speak,
// measured against the noise floor: the A/A control's interval says how far apart two
// independently prepared copies of one arm can be, so only a difference that lies entirely
// beyond it (and beyond the stated minimum effect) is B faster or slower. A resolved A/A
// difference that swallows the sound one is too noisy; anything else is unresolved. CUDA-free
// and pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tools/bench/stats.h"

namespace mxdiff::bench {

enum class Verdict : uint8_t {
  kFaster = 0,          // B faster than A
  kSlower = 1,          // B slower than A
  kUnresolved = 2,      // no difference resolved at this noise
  kTooNoisy = 3,        // the A/A control resolved a difference at least as large as the sound one
  kPositionEffect = 4,  // the sign follows the position, not the arm
  kBitMismatch = 5,     // the arms' outputs differ: no speed claim
  kIncomplete = 6,      // a measurement is missing (an error, too few rounds)
};
std::string_view VerdictName(Verdict verdict);  // "faster", "slower", "unresolved", "too-noisy", ...

struct DifferenceView {
  double estimate = 0;  // B - A, microseconds per call
  Interval ci;
};

struct VerdictInput {
  bool bits_equal = false;
  std::string bits_detail;  // what differed, when not equal
  std::optional<DifferenceView> sound;     // A B B A
  std::optional<DifferenceView> swapped;   // B A A B
  std::optional<DifferenceView> same_arm;  // A/A
  double min_effect_us = 0;  // a smaller |B - A| is no verdict, whatever the noise
};

// How far from zero a difference must lie to be one: the farther end of the A/A interval, or
// the minimum effect where that is larger.
double NoiseFloorUs(const VerdictInput& input);

struct FinalVerdict {
  Verdict verdict = Verdict::kIncomplete;
  std::string message;  // one line for the terminal and the report
};

// The order of the rules: bits, completeness, position, then the sound interval against the
// noise floor. Position effect: the two schedules' estimates have opposite signs and at least
// one of their intervals excludes zero.
FinalVerdict DecideVerdict(const VerdictInput& input, std::string_view a_label, std::string_view b_label);

}  // namespace mxdiff::bench
