// The exit-status contract of every mxdiff program (README.md, tools/README.md): the one home of
// its numbers. It lives here, on the bottom floor, because fuzz/ (the targets, replay and seed
// mains), checkpoint/ (the audit's status) and tools/ (tools/mxdiff/commands.h and the other
// mains) all return it and all include reference/, while none of them may include another's
// floor above it (tests/fuzz/include_floors_test.cmake).
#pragma once

namespace mxdiff {

inline constexpr int kExitOk = 0;            // clean: every check passed, nothing found
inline constexpr int kExitCheckFailed = 1;   // a check failed / a finding (gate: DO-NOT-MERGE)
inline constexpr int kExitBadInput = 2;      // bad input: one line on stderr, never a crash or hang
inline constexpr int kExitInconclusive = 3;  // campaign: a worker did not fuzz; gate: INCONCLUSIVE

}  // namespace mxdiff
