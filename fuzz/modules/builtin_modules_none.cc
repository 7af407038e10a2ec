// LoadBuiltinModules where the build has no CUDA.
#include "absl/status/status.h"
#include "fuzz/modules/module_loader.h"

namespace mxdiff::fuzz {

absl::StatusOr<LoadedModules> LoadBuiltinModules() {
  return absl::UnavailableError("this build has no CUDA (MXDIFF_HAVE_CUDA off)");
}

}  // namespace mxdiff::fuzz
