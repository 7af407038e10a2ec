// The calibration guard fuzz_gemm and tools/repro run before comparing anything: the oracle
// must model the device's arithmetic before a difference can be blamed on a kernel. It judges
// the device alone, through raw m8n8k4 instructions (kernels/mma_probe.h) on random and
// crafted operands, one of them crafted so that every step model gives different bits. It
// never runs a kernel: a kernel that disagrees with the reference is a finding of the
// harness (fuzz/checks/known_cases.h), not a reason to stop fuzzing.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "reference/step_model.h"

namespace mxdiff::fuzz {

struct Calibration {
  StepModel model;
  std::string report;  // which models matched and how many probe steps
};

// FailedPrecondition where no model reproduces every probe step, with the first mismatching
// step of each model: its operands, the device's bits and the model's bits.
absl::StatusOr<Calibration> CalibrateDevice(int device = 0);

}  // namespace mxdiff::fuzz
