// Hand-picked step and reduction cases with expected bits derived by hand (the derivation is
// each case's `why`). One table, used by `mxdiff self-check` and by the unit tests.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "reference/step_model.h"

namespace mxdiff {

struct StepCase {
  std::string_view name;
  std::string_view why;
  uint32_t c;
  std::array<uint16_t, 4> a;
  std::array<uint16_t, 4> b;
  std::array<uint32_t, kStepModelCount> expected;  // indexed by StepModel
};

struct ReduceCase {
  std::string_view name;
  std::string_view why;
  uint32_t partial_sum;
  uint32_t partial;
  std::array<uint32_t, kStepModelCount> expected;  // indexed by StepModel
};

std::span<const StepCase> HandPickedStepCases();
std::span<const ReduceCase> HandPickedReduceCases();

}  // namespace mxdiff
