// A GemmModule backed by a shared library implementing fuzz/modules/mxdiff_kernel_abi.h.
// The external kernel does not route: the harness applies the dispatch rules (as if both
// variants of the case's tactic existed) and the kernel computes the variant they choose, with
// the case's tactic and step model.
#pragma once

#include <memory>
#include <string>

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuzz/modules/gemm_module.h"

namespace mxdiff::fuzz {

// NotFound / FailedPrecondition (with dlerror text or the ABI mismatch) on a bad library.
absl::StatusOr<std::unique_ptr<GemmModule>> LoadExternalModule(const std::string& library_path);

// Whether a name may become part of signatures, file names and the stats file's "name value"
// lines: [A-Za-z0-9._-], at most 64 characters (a kernel's name, a reported plan's label).
bool FileNameSafe(std::string_view name);

// The kind a failing external kernel names at the start of its message (mxdiff_kernel_abi.h):
// "python/bound: 3 elements ..." -> "python/bound". Lower-case letters, digits, '-' and '_' in
// words joined by '/', at least two words, then ": ". "" when the message names none.
std::string_view KernelFailureKind(std::string_view message);

// The kind an external module's failed Run carries (its kernel's KernelFailureKind); "" for a
// status of another origin or a message without one.
std::string FailureKindOf(const absl::Status& status);

}  // namespace mxdiff::fuzz
