// Cases whose reference result is known to separate the step models: fuzz_gemm runs them
// through every module before fuzzing. A module that disagrees with the reference on one is a
// finding like any other (saved case, signature, repro command), not a calibration failure:
// the calibration guard judges the device's arithmetic alone (calibration_guard.h).
#pragma once

#include <vector>

#include "fuzz/formats/case_format.h"

namespace mxdiff::fuzz {

// For every builtin CTA shape: one case crafted so that every step model gives different
// fp16 output (2^14 + 1.25 x 2^-10 - 2^14 + 1 in the first k block), one random case, and one
// random case with two splits. One group of 3 rows, N 8, K 64, admitted scales, ordinary
// requested. Deterministic.
std::vector<FuzzCase> KnownCases();

}  // namespace mxdiff::fuzz
