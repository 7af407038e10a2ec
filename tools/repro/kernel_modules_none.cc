#include "tools/repro/kernel_modules.h"

namespace mxdiff::repro {

GpuModules LoadGpuModules() {
  GpuModules gpu;
  gpu.note = "no GPU side: this build has no CUDA (MXDIFF_HAVE_CUDA off)";
  return gpu;
}

}  // namespace mxdiff::repro
