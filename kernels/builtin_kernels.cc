#include "kernels/builtin_kernels.h"

#include "kernels/tile_raster.h"

namespace mxdiff {

int CtaShapeIndex(const Tactic& tactic) {
  for (int i = 0; i < kCtaShapeCount; ++i) {
    const CtaShape& shape = kCtaShapes[i];
    if (shape.m == tactic.cta_m && shape.n == tactic.cta_n && shape.k == tactic.cta_k) return i;
  }
  return -1;
}

void RegisterBuiltinKernels(KernelRegistry& registry) {
  for (const CtaShape& shape : kCtaShapes) {
    const Tactic tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k, .splits = 1, .swizzle = 0};
    registry.Add(tactic, Transform::kOrdinary);
    registry.Add(tactic, Transform::kFolded);
  }
}

KernelRegistry BuiltinKernelRegistry() {
  KernelRegistry registry(kMaxSwizzleLog2);
  RegisterBuiltinKernels(registry);
  return registry;
}

}  // namespace mxdiff
