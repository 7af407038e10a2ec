// Child processes started from an argument vector (posix_spawnp), never through a shell: a path
// from the user (a --report folder with a quote or `;` in it) stays one argument and is never
// read as shell syntax. The gate (git, python3 for its figures, the fuzzing campaign) and the
// tests that run mxdiff as users do share this one helper.
#pragma once

#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace mxdiff::cli {

// Where the child's stderr goes.
enum class ChildStderr {
  kSeparate,   // captured in ChildRun::err
  kMerged,     // captured in ChildRun::out, interleaved with stdout as written
  kDiscarded,  // /dev/null
};

struct ChildRun {
  int exit_status = -1;  // the child's exit status; -1 where it did not exit (killed: `signal`)
  int signal = 0;        // the signal that ended it, 0 where it exited
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up on PATH where it has no '/') with argv, stdin from /dev/null, the
// caller's environment, and waits for it. An error only where the child could not be started
// (no such program, not executable, no process): the message names the program and why.
absl::StatusOr<ChildRun> RunChild(std::span<const std::string> argv, ChildStderr stderr_to = ChildStderr::kSeparate);

}  // namespace mxdiff::cli
