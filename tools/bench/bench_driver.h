// `mxdiff bench` on a GPU: for each shape, the sound comparison of two arms and its controls,
// and on request the seed's naive protocol beside it. Needs CUDA (MXDIFF_HAVE_CUDA).
//
// Sound (A B B A): one tactic, chosen once (the dispatch table's, --tune's or --tactic's), is
// pinned for both arms, which fail closed (a folded arm that would fall back is an error). Both
// arms first run every weight set once: module loading, workspace allocation and the bit check
// (ordinary and folded must agree bit for bit on an admitted layer; a difference stops the
// shape: no speed claim). Then each arm is warmed up on its own and captured into its own CUDA
// graph, instantiated and replayed once untimed, A first. Every replay cycles through weight
// sets worth several times the L2 and is preceded by an L2 flush, so no arm runs from a cache
// the other filled. After timing, both graphs' last outputs are compared again.
// Swapped (B A A B): the same with B warmed and captured first. A/A: A against a second,
// independently captured A.
//
// Naive (the seed's flawed protocol, to show the artifact): A is captured at its very first use
// on a fresh runner (no warm-up; the dispatch state untuned; its workspace allocated while
// capturing); then the shape is tuned (as the seed's first arm paid for it) and B is captured
// after that, inheriting the tuned tactic and the warm workspace; no tactic is pinned, one weight
// set is shared (it fits in L2), no flush. How A's tactic and the tuning come about depends on
// --first_use (naive_protocol.h): with `table` A runs the dispatch table's tactic; with `tune` A's
// graph holds the fallback, because the runner cannot tune inside a capture.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/tune_on_first_use.h"
#include "reference/step_model.h"
#include "tools/bench/bench_spec.h"
#include "tools/bench/report.h"
#include "tools/bench/stopping.h"

namespace mxdiff::bench {

struct BenchConfig {
  ArmSpec a;
  ArmSpec b;
  std::vector<ShapeSpec> shapes;
  int groups = 6;
  int rows_per_group = 1;
  std::optional<Tactic> tactic;  // pinned for both arms; absent: the dispatch table's (or --tune)
  bool tune = false;
  bool naive = false;
  // The runner mode (kernels/tune_on_first_use.h) of the runners both protocols use; the naive
  // protocol's order of steps depends on it (naive_protocol.h). `first_use_fallback`: what a
  // first use inside a capture runs in kTune mode (absent: the dispatch table's).
  FirstUse first_use = FirstUse::kTable;
  std::optional<Tactic> first_use_fallback = kGenericTactic;
  double min_effect_us = 0;  // the verdict's least |B - A| (verdict.h)
  StoppingRule stopping;
  int resamples = 10000;
  int check_resamples = 2000;
  double confidence = 0.95;
  uint64_t seed = 1;  // weights, activations and bootstrap
  size_t sets_bytes = size_t(256) << 20;
  int min_sets = 4;
  int calls = 0;  // per replay; 0: the smallest multiple of the set count >= 32 (host timing: the set count)
  bool l2_flush = true;
  int warmup_passes = 2;
  int device = 0;
  StepModel ext_model = StepModel::kSm90Emulated;
  std::string command;
  std::function<void(const std::string&)> log;  // progress lines; may be empty
};

// The experiment settings (stopping rule, resamples, confidence) of `config` for one pattern and seed.
ExperimentConfig TimingConfig(const BenchConfig& config, Pattern pattern, uint64_t seed);

// What runs one protocol of a shape (the GEMM sets, the layer).
class ProtocolRunner {
 public:
  virtual ~ProtocolRunner() = default;
  virtual ExperimentReport Paired(Protocol protocol, const ArmSpec& sa, const ArmSpec& sb, Pattern pattern,
                                  bool b_first, uint64_t seed) = 0;
  virtual ExperimentReport Naive(uint64_t seed) = 0;
};

// One shape's protocols in order, appended to `experiments`: sound (A B B A); where its bits
// agreed, swapped (B A A B), the A/A control and, with config.naive, the naive one. Seeds count
// up from config.seed.
void RunProtocols(const BenchConfig& config, ProtocolRunner& runner, std::vector<ExperimentReport>& experiments);

// Unavailable where no GPU exists; other errors for a setup that cannot run at all (a sticky
// device error). A shape or protocol that fails is reported in the report, not here.
absl::StatusOr<BenchReport> RunBench(const BenchConfig& config);

}  // namespace mxdiff::bench
