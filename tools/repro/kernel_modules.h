// The GPU modules for repro: the builtin ordinary and folded kernels after the calibration
// guard, or none (with the reason) where the build has no CUDA or the machine no GPU. One
// implementation file per case (kernel_modules_cuda.cc / kernel_modules_none.cc), chosen by CMake.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fuzz/modules/gemm_module.h"

namespace mxdiff::repro {

struct GpuModules {
  std::vector<std::unique_ptr<fuzz::GemmModule>> modules;
  std::string note;  // the device and its calibration, or why there is no GPU side
  bool calibration_failed = false;
};

GpuModules LoadGpuModules();

}  // namespace mxdiff::repro
