// The CTA shapes this build instantiates, one table shared by the CUDA instantiations and the
// CUDA-free registry, so the registry can never list a kernel the build lacks or miss one it has.
// Split count and raster swizzle are run-time parameters of every instantiation.
#pragma once

#include "kernels/route.h"

namespace mxdiff {

struct CtaShape {
  int m;
  int n;
  int k;
};

inline constexpr CtaShape kCtaShapes[] = {{8, 128, 64}, {16, 128, 32}, {32, 128, 32}, {64, 128, 32}};
inline constexpr int kCtaShapeCount = sizeof(kCtaShapes) / sizeof(kCtaShapes[0]);
inline constexpr int kCtaThreads = 128;  // four warps, each owning 32 of the CTA's 128 columns

// Index into kCtaShapes of the tactic's CTA shape, or -1.
int CtaShapeIndex(const Tactic& tactic);

// Every shape x both transforms, registered explicitly (no static initializers).
void RegisterBuiltinKernels(KernelRegistry& registry);
KernelRegistry BuiltinKernelRegistry();

}  // namespace mxdiff
