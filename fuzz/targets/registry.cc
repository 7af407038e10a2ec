// The registry of fuzz targets. A target's registration is its line in fuzz/targets.txt:
// fuzz/CMakeLists.txt writes that list, in its order, as MXDIFF_REGISTERED_FUZZ_TARGETS(X) (one
// X(name) per target) into registered_targets.inc, and fuzz/targets/<name>.cc defines each one
// with MXDIFF_FUZZ_TARGET.
#include "fuzz/driver/fuzz_target.h"
#include "registered_targets.inc"

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
