// The builtin kernels as fuzz_gemm modules, sharing one prepared layer per case. Built only with
// CUDA (MXDIFF_HAVE_CUDA).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/modules/gemm_module.h"
#include "kernels/gemm_runner.h"

namespace mxdiff::fuzz {

// The runner's registry with the folded instantiation of every second CTA shape left out: a
// runner built on it (GemmRunner::CreateWithRegistry) must fall back to the ordinary kernel
// there (or fail closed), never launch nothing, the seed project's no-launch bug.
KernelRegistry PartialFoldedRegistry(const KernelRegistry& full);

// What fuzz_gemm, repro and the GPU corpus replay run: "ordinary" and "folded" on `runner`,
// and "folded-partial" on a second runner over PartialFoldedRegistry (on the same device).
// `device_model` is the calibration guard's verdict (fuzz/driver/calibration_guard.h); a case
// without its weights on the host is prepared from their device materialization
// (GemmModule::UseDeviceWeights: the device oracle's too).
absl::StatusOr<std::vector<std::unique_ptr<GemmModule>>> MakeBuiltinModules(std::shared_ptr<GemmRunner> runner,
                                                                            StepModel device_model, int device = 0);

}  // namespace mxdiff::fuzz
