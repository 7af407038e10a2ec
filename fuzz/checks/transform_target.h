// fuzz_transform's property: for every scale byte of the case and all 16 codes, both
// transforms against the MX-spec value and the documented contract deviations (docs/numerics.md: transforms);
// admission exactly when the two transforms agree on all codes; the packed nibble order; the
// kernels' vectorized dequantize_word against the scalar dequantize; and a route that never
// takes folded on a layer where any bit would differ.
#pragma once

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"

namespace mxdiff::fuzz {

CheckResult CheckTransformCase(const FuzzCase& fuzz_case);

}  // namespace mxdiff::fuzz
