// The naive protocol's preparation of its two graph arms, in the seed's order, CUDA-free (the
// arms are BenchArm; fakes in the CPU test). What B inherits from A depends on the runner mode
// (kernels/tune_on_first_use.h):
//
// - FirstUse::kTable (the runner's own dispatch): A and B on two fresh runners. A is captured at
//   its first use (relaxed mode, no warm-up): the dispatch table's tactic. Then `tune` tunes B's
//   runner (as the seed's first arm paid for it) and B is captured there: the tuned tactic.
// - FirstUse::kTune (the seed engine's dispatch): A and B on one tune-on-first-use runner. A is
//   captured at its first use: inside a capture the runner cannot tune, so A's graph holds the
//   fallback. Then A runs once outside a capture (the seed's pipeline ran its first arm): that
//   first call tunes and caches the winner. Then B is captured: the cached winner.
//
// No tactic is pinned in either; the sound protocol pins one, which no runner mode reaches.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/tune_on_first_use.h"
#include "tools/bench/bench_arm.h"

namespace mxdiff::bench {

inline constexpr int kCaptureModeRelaxed = 2;  // cudaStreamCaptureModeRelaxed

struct NaivePreparation {
  std::string a_route;  // what A's graph holds
  std::string b_route;
  std::string tuning;   // how the tactic B inherits came about
};

// `tune` (kTable only): tunes B's runner and returns the winner. `a_first_call` (kTune only;
// null: `a`): the arm whose RunSet(0) is A's first call outside a capture, e.g. A's kernel on
// another stream, so that the winner's larger split-K workspace never replaces the one A's graph
// holds. An error names the step.
absl::StatusOr<NaivePreparation> PrepareNaiveArms(FirstUse mode, BenchArm& a, BenchArm& b,
                                                  const std::function<absl::StatusOr<Tactic>()>& tune,
                                                  BenchArm* a_first_call = nullptr);

}  // namespace mxdiff::bench
