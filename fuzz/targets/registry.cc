// The registry of fuzz targets: one line per target (its file defines it with MXDIFF_FUZZ_TARGET).
// fuzz/targets.txt lists the same names in the same order (tests/fuzz/registry_test.cc).
#include "fuzz/driver/fuzz_target.h"

// The registration: one line per target.
#define MXDIFF_REGISTERED_FUZZ_TARGETS(X) \
  X(fuzz_transform)                       \
  X(fuzz_dispatch)                        \
  X(fuzz_reference)                       \
  X(fuzz_safetensors)                     \
  X(fuzz_gemm)                            \
  X(fuzz_layer)

MXDIFF_REGISTERED_FUZZ_TARGETS(MXDIFF_DECLARE_FUZZ_TARGET)
#define MXDIFF_TARGET_ADDRESS(name) &MxdiffFuzzTarget_##name(),

namespace mxdiff::fuzz {

std::span<const FuzzTarget* const> Registry() {
  static const FuzzTarget* const targets[] = {MXDIFF_REGISTERED_FUZZ_TARGETS(MXDIFF_TARGET_ADDRESS)};
  return targets;
}

const FuzzTarget* FindTarget(std::string_view name) {
  for (const FuzzTarget* target : Registry()) {
    if (target->name == name) return target;
  }
  return nullptr;
}

const FuzzTarget* TargetOfFileName(std::string_view file_name) {
  return FindTarget(file_name.substr(0, file_name.find('.')));
}

}  // namespace mxdiff::fuzz
