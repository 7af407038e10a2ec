// A GemmModule backed by a shared library implementing fuzz/modules/mxdiff_kernel_abi.h.
// The external kernel does not route: the harness applies the dispatch rules (as if both
// variants of the case's tactic existed) and the kernel computes the variant they choose, with
// the case's tactic and step model.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fuzz/modules/gemm_module.h"

namespace mxdiff::fuzz {

// NotFound / FailedPrecondition (with dlerror text or the ABI mismatch) on a bad library.
absl::StatusOr<std::unique_ptr<GemmModule>> LoadExternalModule(const std::string& library_path);

}  // namespace mxdiff::fuzz
