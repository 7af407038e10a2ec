// fuzz_transform's property: for every scale byte of the case and all 16 codes, both
// transforms against the MX-spec value and the documented contract deviations (docs/numerics.md: transforms);
// admission exactly when the two transforms agree on all codes; the packed nibble order; the
// kernels' vectorized dequantize_word against the scalar dequantize; and a route that never
// takes folded on a layer where any bit would differ.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"

namespace mxdiff::fuzz {

// Its named checks, each its own function, in the order they run: scale-bytes (each byte's
// transforms against the spec and its FoldAdmitted), nibble-order, dequantize-word,
// layer-admission, route. All run on a case and every finding is kept.
std::vector<std::string_view> TransformCheckNames();
std::vector<Finding> TransformFindings(const FuzzCase& fuzz_case);

// Test seam: the checks named here report a finding `transform/planted/<name>` where they find none.
void PlantTransformChecksForTest(std::vector<std::string> names);

}  // namespace mxdiff::fuzz
