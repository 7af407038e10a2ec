// A case's codes and scales materialized on the device from their recipes
// (fuzz/formats/tensor_recipe_device.h), shared by fuzz_gemm's device reference and the builtin
// kernel modules of one target: one materialization per case's weights, kept while the next case
// has the same shape and recipes, and the same device buffers handed to both. Made by
// LoadBuiltinModules (LoadedModules::device_weights), which the target hands to
// MakeDeviceReferenceOracle: owned by the target's state, never the process's. Built only with CUDA.
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "fuzz/formats/case_format.h"
#include "reference/device/device_reference.h"

namespace mxdiff::fuzz {

class DeviceRecipeWeights {
 public:
  // The case's codes and scales (both from recipes) on the current device, materialized unless
  // they are there already. InvalidArgument where they are not recipes; the errors of
  // MaterializeOnDevice and DeviceWeights::Reserve otherwise (ResourceExhausted out of memory).
  absl::StatusOr<const DeviceWeights*> Of(const FuzzCase& fuzz_case);
  // The fold admission of the case's scales (Of's materialization), judged on the device once per
  // materialization: AdmitLayer's verdict without the scale bytes on the host.
  absl::StatusOr<const LayerAdmission*> AdmissionOf(const FuzzCase& fuzz_case);
  // Materializations since the start (a test counts that both users share one).
  size_t materializations() const { return materializations_; }
  // The next Of materializes again (a fresh state for a finding's confirmation).
  void Forget() { valid_ = false; }

 private:
  DeviceWeights weights_;
  bool valid_ = false;  // weights_ holds the weights below
  std::optional<LayerAdmission> admission_;  // of weights_' scales, once asked for
  int groups_ = 0, n_ = 0, k_ = 0;
  std::optional<TensorRecipe> codes_recipe_, scales_recipe_;
  size_t materializations_ = 0;
};

}  // namespace mxdiff::fuzz
