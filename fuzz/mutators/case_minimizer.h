// Shrinks a fuzz case while a property keeps holding (repro --minimize: the finding's signature
// stays the same), the idea of libFuzzer's -minimize_crash on the structured case: first the
// shape (empty experts, then experts, rows, N, K, each tried halved and by one), keeping the
// tensors' recipes; then, once every tensor is small enough to store byte by byte, the values
// (chunks of each tensor set to 1.0 / code 1.0 / scale 2^0) and the tactic's swizzle.
#pragma once

#include <chrono>
#include <functional>

#include "fuzz/formats/case_format.h"

namespace mxdiff::fuzz {

struct MinimizeOptions {
  int max_evaluations = 400;
  std::chrono::seconds time_limit{120};
};

struct MinimizeResult {
  FuzzCase minimized;  // valid, and the property holds for it
  int evaluations = 0;
  int accepted = 0;  // edits kept
  bool exhausted = false;  // the budget ran out before no edit helped any more
};

// `keeps` must hold for `start`; it is called on valid, materialized candidates only.
MinimizeResult MinimizeCase(const FuzzCase& start, const std::function<bool(const FuzzCase&)>& keeps,
                            const MinimizeOptions& options = {});

}  // namespace mxdiff::fuzz
