// The calibration guard fuzz_gemm runs before fuzzing: the oracle must match the device before
// any difference can be blamed on a kernel. Two stages: raw m8n8k4 instructions on random and
// crafted operands (kernels/mma_probe.h) select the step models the device matches; then
// known cases through the ordinary kernel path, including one crafted so that every model
// gives different fp16 output, must match the reference under the selected model.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "kernels/gemm_runner.h"
#include "reference/step_model.h"

namespace mxdiff::fuzz {

struct Calibration {
  StepModel model;
  std::string report;  // which models matched, how many probes, which tactics
};

// FailedPrecondition (with the evidence) where no model fits or the kernel path disagrees.
absl::StatusOr<Calibration> CalibrateDevice(GemmRunner& runner, int device = 0);

}  // namespace mxdiff::fuzz
