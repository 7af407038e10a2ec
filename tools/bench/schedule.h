// The order of arms within one round. A B B A puts each arm once at the edges and once in the
// middle, so a linear drift within a round cancels in the round's difference; the swapped
// control B A A B flips which arm holds the edges, so an effect of position (not of the arm)
// changes sign between the two. CUDA-free.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace mxdiff::bench {

enum class Pattern : uint8_t { kAbba = 0, kBaab = 1 };
inline constexpr int kSlotsPerRound = 4;

std::string_view PatternName(Pattern pattern);                 // "ABBA", "BAAB"
std::optional<Pattern> ParsePattern(std::string_view name);    // the same names

// Which arm (0 = A, 1 = B) runs in slot 0..3 of a round.
std::array<int, kSlotsPerRound> Slots(Pattern pattern);

// The round's difference B - A: the mean of B's two slots minus the mean of A's, from the four
// per-call times in slot order.
double RoundDifference(Pattern pattern, const std::array<double, kSlotsPerRound>& slot_times);

}  // namespace mxdiff::bench
