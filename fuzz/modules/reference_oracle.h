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
#include "fuzz/formats/case_format.h"
#include "reference/admission.h"
#include "reference/problem.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {

class DeviceRecipeWeights;  // device_recipe_weights.h (CUDA builds)

class ReferenceOracle {
 public:
  virtual ~ReferenceOracle() = default;
  virtual std::string name() const = 0;
  // ReferenceGemm's bits for the problem (options.threads and options.path do not apply).
  // Unavailable: it cannot run here; ResourceExhausted: the case does not fit (out of memory).
  // The differential then computes the case on the CPU (a fallback, counted), never skips it.
  virtual absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                            std::vector<uint16_t>& output) = 0;

  // Whether the oracle materializes a case's recipe weights itself (the device reference: on the
  // device, once per case's weights), so that they never cross PCIe: the differential then calls
  // GemmCase instead of Gemm for a large case whose codes and scales both come from recipes
  // (GoesDeviceWay, fuzz/oracle/reference_service.h).
  virtual bool MaterializesRecipes() const { return false; }
  // ReferenceGemm's bits for the whole case, its codes and scales materialized from its recipes
  // (the case's own vectors of them are not read), its row offsets and activations read from the
  // host. Errors as Gemm's.
  virtual absl::Status GemmCase(const FuzzCase& fuzz_case, const ReferenceOptions& options,
                                std::vector<uint16_t>& output) {
    (void)fuzz_case, (void)options, (void)output;
    return absl::UnimplementedError(name() + " does not materialize recipes");
  }
  // AdmitLayer's verdict on the case's recipe scales, judged where this oracle materializes them
  // (GemmCase's weights). An error: the differential admits on the host instead.
  virtual absl::StatusOr<LayerAdmission> AdmitCase(const FuzzCase& fuzz_case) {
    (void)fuzz_case;
    return absl::UnimplementedError(name() + " does not materialize recipes");
  }
};

// Whether the case's weights (codes and scales) both come from recipes, not literal bytes.
inline bool WeightsFromRecipes(const FuzzCase& fuzz_case) {
  return fuzz_case.recipe(TensorKind::kCodes).has_value() && fuzz_case.recipe(TensorKind::kScales).has_value();
}

// The device reference as an oracle: Unavailable saying why where the build has no CUDA or the
// machine no device. Defined in builtin_modules_cuda.cc or builtin_modules_none.cc. It reads the
// device materialization `device_weights` (LoadedModules::device_weights: the kernel modules'),
// or where that is null one of its own.
absl::StatusOr<std::unique_ptr<ReferenceOracle>> MakeDeviceReferenceOracle(
    std::shared_ptr<DeviceRecipeWeights> device_weights = nullptr);

}  // namespace mxdiff::fuzz
