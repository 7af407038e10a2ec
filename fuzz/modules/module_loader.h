// The one module loader of fuzz_gemm, tools/repro and the GPU corpus replay: the builtin
// kernels (where the build has CUDA and the machine a GPU, after the calibration guard), and
// an external kernel library. Selection works like CryptoFuzz's --force-module and
// --disable-modules: a forced module that cannot load is an error, never a silent absence.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/modules/gemm_module.h"

namespace mxdiff::fuzz {

struct ModuleSelection {
  // Only these modules (names as in signatures: "ordinary", "folded", "folded-partial",
  // "ext-NAME", or "external" for whatever --external loads); empty: every module that loads.
  std::vector<std::string> force;
  std::vector<std::string> disable;
  std::string external_library;  // a library implementing fuzz/modules/mxdiff_kernel_abi.h
};

// Reads `--modules=a,b`, `--disable-modules=a,b` and `--external=LIB` from `args` (other
// arguments are left alone: libFuzzer ignores flags that start with `--`), then the
// environment's MXDIFF_MODULES, MXDIFF_DISABLE_MODULES and MXDIFF_EXTERNAL_KERNEL for what the
// arguments left unset.
ModuleSelection ModuleSelectionFromArgs(std::span<const std::string_view> args);

struct LoadedModules {
  std::vector<std::unique_ptr<GemmModule>> modules;
  std::string report;  // the device and its calibration, the external library, or why neither
};

// Errors: a forced module that did not load, a module name that no module has, a GPU whose
// calibration guard failed, an external library that does not load.
absl::StatusOr<LoadedModules> LoadModules(const ModuleSelection& selection);

// What the build contributes: the builtin kernel modules, or Unavailable saying why there
// are none (no CUDA in this build, no GPU on this machine). Defined in builtin_modules_cuda.cc
// or builtin_modules_none.cc, whichever the build has. FailedPrecondition where the device
// fails the calibration guard.
absl::StatusOr<LoadedModules> LoadBuiltinModules();

}  // namespace mxdiff::fuzz
