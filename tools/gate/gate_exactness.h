// The two judgements of the exactness step (gate_exactness_step.cc) that need no device, so that
// they are tested on the CPU (tests/tools/gate/gate_exactness_test.cc).
#pragma once

#include <string>

#include "kernels/moe_layer.h"
#include "tools/gate/gate_context.h"
#include "tools/gate/gate_inputs.h"

namespace mxdiff::gate {

// "" when each GEMM ran what the rule on this rank's bytes demands for the arm (folded exactly
// where the rank's slice is admitted; ordinary for the ordinary arm; a folded kernel missing for
// the tactic is no wrong fallback) and the layer's own admission agrees with that rule; else what
// went wrong, naming the layer and the GEMM.
std::string CheckRoutes(const GateLayer& layer, const MoeLayer& device, Transform arm, const MoeLayerRoutes& routes);

// The differing replay as a fuzz_layer finding (`.case` and `.txt`, fuzz/driver/findings.h) in
// `dir`: "written PATH (repro PATH)", or why there is none (a layer beyond the layer case format).
std::string WriteLayerCase(const GateLayer& layer, Transform arm, const MoeLayerRoutes& routes, const MoeInputs& x,
                           const std::string& signature, const std::string& description, const std::string& dir);

}  // namespace mxdiff::gate
