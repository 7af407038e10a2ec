// A second oracle behind fuzz_gemm's differential (fuzz/checks/gemm_differential.h): the device
// reference (reference/device/) where the build has CUDA and the machine a GPU. The CPU reference
// stays the root of trust: the differential asks this oracle only for large cases and checks its
// bits against the CPU reference on every sampled case (--cpu-check-every) and wherever a kernel
// disagrees with it. Tests inject their own (a planted defect, computed on the CPU).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "reference/problem.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {

class ReferenceOracle {
 public:
  virtual ~ReferenceOracle() = default;
  virtual std::string name() const = 0;
  // ReferenceGemm's bits for the problem (options.threads and options.path do not apply).
  // Unavailable: it cannot run here; ResourceExhausted: the case does not fit (out of memory).
  // The differential then computes the case on the CPU (a fallback, counted), never skips it.
  virtual absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                            std::vector<uint16_t>& output) = 0;

  // Whether the oracle computes on a case's weights where the device holds them
  // (DeviceCaseWeights, materialized from the case's recipes once per case by fuzz/oracle/'s
  // CaseWeights, the same buffers the kernel modules prepare from), so that they never cross
  // PCIe: the differential then calls GemmOnDeviceWeights instead of Gemm for a large case whose
  // codes and scales both come from recipes (GoesDeviceWay, fuzz/oracle/reference_service.h).
  virtual bool TakesDeviceWeights() const { return false; }
  // ReferenceGemm's bits for the whole case: `rows` gives the shape, the row offsets and the
  // activations (its codes and scales are not read), `weights` the codes and scales. Errors as Gemm's.
  virtual absl::Status GemmOnDeviceWeights(const GroupedProblem& rows, const DeviceCaseWeights& weights,
                                           const ReferenceOptions& options, std::vector<uint16_t>& output) {
    (void)rows, (void)weights, (void)options, (void)output;
    return absl::UnimplementedError(name() + " does not take device weights");
  }
};

// The device reference as an oracle: Unavailable saying why where the build has no CUDA or the
// machine no device. Defined in builtin_modules_cuda.cc or builtin_modules_none.cc.
absl::StatusOr<std::unique_ptr<ReferenceOracle>> MakeDeviceReferenceOracle();

}  // namespace mxdiff::fuzz
