// LoadBuiltinModules, MakeDeviceReferenceOracle and MakeDeviceRecipeWeights where the build has no CUDA.
#include "absl/status/status.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"

namespace mxdiff::fuzz {

absl::StatusOr<LoadedModules> LoadBuiltinModules() {
  return absl::UnavailableError("this build has no CUDA (MXDIFF_HAVE_CUDA off)");
}

absl::StatusOr<std::unique_ptr<ReferenceOracle>> MakeDeviceReferenceOracle() {
  return absl::UnavailableError("this build has no CUDA (MXDIFF_HAVE_CUDA off): no device reference");
}

std::unique_ptr<DeviceRecipeWeights> MakeDeviceRecipeWeights() { return nullptr; }

}  // namespace mxdiff::fuzz
