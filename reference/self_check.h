// The reference's built-in self-checks, run by `mxdiff self-check`: exhaustive transform
// properties over all 16 codes x 256 scale bytes, the fold admission set derived from the
// transforms, fp16 conversions, and every model's hand-picked cases (step_model_cases.h).
#pragma once

#include <string>
#include <vector>

namespace mxdiff {

struct SelfCheckResult {
  std::string name;
  bool passed = false;
  std::string detail;  // what was checked, or the first counterexample
};

std::vector<SelfCheckResult> RunSelfChecks();

}  // namespace mxdiff
