// The device's measured fp32 FMA rate (the benchmark's arithmetic ceiling: sm_90 runs the
// m8n8k4 steps as FFMA, docs/numerics.md: one m8n8k4 step).
#pragma once

#include "absl/status/statusor.h"

namespace mxdiff::testing {

absl::StatusOr<double> MeasureFfmaPerSecond();

}  // namespace mxdiff::testing
