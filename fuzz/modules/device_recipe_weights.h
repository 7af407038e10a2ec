// One case's codes and scales on the device, materialized from their recipes
// (fuzz/formats/tensor_recipe_device.h) with the layer's fold admission judged there: what the
// builtin kernel modules prepare from and fuzz_gemm's device reference computes on. The one asker
// is fuzz/oracle/'s CaseWeights (owned by the target's state, never the process): it asks once per
// case and hands the view to the modules (GemmModule::UseDeviceWeights) and the device oracle
// (ReferenceOracle::GemmOnDeviceWeights). The materialization is kept while the next case has the
// same shape and recipes. CUDA-free header; the materialization exists only where nvcc is found.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "fuzz/formats/case_format.h"
#include "reference/admission.h"

namespace mxdiff {
class DeviceWeights;  // reference/device/device_reference.h
}

namespace mxdiff::fuzz {

// One case's weights where they are on the device.
struct DeviceCaseWeights {
  // The packed codes and scale bytes in device memory; null from a stand-in that keeps them
  // elsewhere (a test's, which its own oracle reads).
  const DeviceWeights* weights = nullptr;
  // AdmitLayer's verdict on those scale bytes, counted on the device.
  LayerAdmission admission;
  // Which materialization this is (1, 2, ...): a layer prepared on an earlier one is stale.
  size_t materialization = 0;
};

class DeviceRecipeWeights {
 public:
  virtual ~DeviceRecipeWeights() = default;
  // The case's codes and scales (both from recipes) on the current device with their admission,
  // materialized unless they are there already. InvalidArgument where they are not recipes; the
  // errors of MaterializeOnDevice and DeviceWeights::Reserve otherwise (ResourceExhausted out of
  // memory). Valid until the next Of or Forget.
  virtual absl::StatusOr<const DeviceCaseWeights*> Of(const FuzzCase& fuzz_case) = 0;
  // Materializations since the start (a test counts that the oracle and the kernels share one).
  virtual size_t materializations() const = 0;
  // The next Of materializes again (a fresh state for a finding's confirmation).
  virtual void Forget() = 0;
};

// The device's materialization where the build has CUDA (device_recipe_weights.cc); null where it
// has none (builtin_modules_none.cc). Nothing touches the device before the first Of.
std::unique_ptr<DeviceRecipeWeights> MakeDeviceRecipeWeights();

}  // namespace mxdiff::fuzz
