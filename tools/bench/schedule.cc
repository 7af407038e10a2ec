#include "tools/bench/schedule.h"

namespace mxdiff::bench {

std::string_view PatternName(Pattern pattern) { return pattern == Pattern::kAbba ? "ABBA" : "BAAB"; }

std::optional<Pattern> ParsePattern(std::string_view name) {
  if (name == "ABBA") return Pattern::kAbba;
  if (name == "BAAB") return Pattern::kBaab;
  return std::nullopt;
}

std::array<int, kSlotsPerRound> Slots(Pattern pattern) {
  if (pattern == Pattern::kAbba) return {0, 1, 1, 0};
  return {1, 0, 0, 1};
}

double RoundDifference(Pattern pattern, const std::array<double, kSlotsPerRound>& slot_times) {
  const std::array<int, kSlotsPerRound> slots = Slots(pattern);
  double sum[2] = {0, 0};
  for (int slot = 0; slot < kSlotsPerRound; ++slot) sum[slots[slot]] += slot_times[slot];
  return sum[1] / 2 - sum[0] / 2;
}

}  // namespace mxdiff::bench
