// `mxdiff gate`'s composition (issue 18): the five steps in order, a progress line per step on
// stderr, the model-wide figures and the accuracy-run sentence, the verdict (gate_verdict.h) and
// the report (gate_report.h, with the audit histograms' PNG from plot_gate.py where matplotlib
// is there). tools/mxdiff/gate_command.cc parses the flags into GateOptions.
#pragma once

#include <string>

#include "tools/gate/gate_context.h"

namespace mxdiff::gate {

struct GateRunConfig {
  GateOptions options;
  std::string report_dir{};  // "" none
  std::string tool_commit{};
};

// The exit status: 0 MERGE, 1 DO-NOT-MERGE, 3 INCONCLUSIVE, 2 bad input (one line on stderr,
// nothing written to the report folder).
int RunGate(const GateRunConfig& config);

}  // namespace mxdiff::gate
