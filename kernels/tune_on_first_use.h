// A runner mode that tunes on first use, the dispatch mechanism of the seed's engine: the first
// call of a shape that comes without a tactic, and finds none cached, runs the tuner
// (GemmRunner::Tune) and caches the winner; later calls reuse it. The tuner times launches with
// events and synchronizes, so it cannot run inside a CUDA graph capture: a first call made while
// its stream is being captured runs the untuned fallback instead (and that tactic is baked into
// the graph), and the shape is tuned at its next call outside a capture. This is how a graph
// captured first can hold a different tactic from one captured after it (tools/bench/README.md:
// the seed's 95 -> 53 us artifact), and why `mxdiff bench --naive --first_use=tune` shows it.
//
// A request with a tactic (the sound bench protocol pins one) passes through untouched: the mode
// cannot reach it. CUDA-free: the capture probe is injected (CreateTuneOnFirstUseRunner gives the
// CUDA one), so the decision logic is tested on the CPU with a fake runner and a fake tuner.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dispatch_table.h"
#include "kernels/gemm_runner.h"
#include "kernels/tactic_cache.h"

namespace mxdiff {

// kTable: a call without a tactic gets the cached one, else the dispatch table's (GemmRunner's
// own behaviour). kTune: a call without a tactic and with nothing cached tunes first.
enum class FirstUse { kTable, kTune };
std::string_view FirstUseName(FirstUse mode);
std::optional<FirstUse> ParseFirstUse(std::string_view text);

// This runner's shape-agnostic tactic (the shape GemmRunner::Tune plans with): what an engine
// without a per-shape table runs before its tuner has measured a shape. No split-K, so its
// partition of K, and hence its bits, differ from a split tactic's.
inline constexpr Tactic kGenericTactic{8, 128, 64, 1, 0};

enum class FirstUseSource {
  kPinned,    // the request named a tactic
  kCached,    // tuned earlier
  kTable,     // kTable mode: the dispatch table's
  kTuneNow,   // kTune mode, first call outside a capture: tune, cache, run the winner
  kFallback,  // kTune mode, first call inside a capture: the fallback, nothing cached
};
std::string_view FirstUseSourceName(FirstUseSource source);

struct FirstUseDecision {
  FirstUseSource source = FirstUseSource::kTable;
  Tactic tactic;  // what runs; for kTuneNow the tuner's winner replaces it
};

// Pure: which tactic a call gets. `fallback`: what a call inside a capture runs in kTune mode.
FirstUseDecision DecideFirstUse(FirstUse mode, const std::optional<Tactic>& pinned, const std::optional<Tactic>& cached,
                                const Tactic& table, const Tactic& fallback, bool capturing);

struct TuneOnFirstUseOptions {
  FirstUse mode = FirstUse::kTune;
  std::optional<Tactic> fallback;  // absent: the dispatch table's tactic (the inner runner's DefaultTactic)
  // Whether work launched on `stream` (a cudaStream_t; null: the runner's own) is being
  // captured now. Empty: never.
  std::function<bool(void* stream)> capturing;
};

// One decision as it was made, for reports and tests.
struct FirstUseEvent {
  DispatchShape shape;
  FirstUseSource source = FirstUseSource::kTable;
  Tactic tactic;  // what ran
};

// Wraps a runner: Prepare, Tune, CheckDevice and the registry are the inner runner's; Run and
// RunOnDevice decide the tactic with DecideFirstUse and pass it to the inner runner. A failed
// tuning is the call's error (nothing is cached). DefaultTactic: the cached winner, else the
// inner runner's (the table's). Not thread-safe beyond what the inner runner is.
class TuneOnFirstUseRunner final : public GemmRunner {
 public:
  TuneOnFirstUseRunner(std::unique_ptr<GemmRunner> inner, TuneOnFirstUseOptions options);

  const KernelRegistry& registry() const override { return inner_->registry(); }
  std::string DeviceName() const override { return inner_->DeviceName(); }
  absl::StatusOr<std::unique_ptr<PreparedLayer>> Prepare(int groups, int n, int k, std::span<const uint8_t> packed_codes,
                                                        std::span<const uint8_t> scale_bytes) override;
  absl::StatusOr<Route> Run(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                            std::span<const uint16_t> activations, std::span<uint16_t> output,
                            const RunRequest& request) override;
  absl::StatusOr<Route> RunOnDevice(const PreparedLayer& layer, const DeviceBatch& batch,
                                    const RunRequest& request) override;
  // Tunes through the inner runner and caches the winner here as well.
  absl::StatusOr<Tactic> Tune(const PreparedLayer& layer, std::span<const int32_t> row_offsets) override;
  Tactic DefaultTactic(int n, int k, std::span<const int32_t> row_offsets) const override;
  absl::Status CheckDevice() override { return inner_->CheckDevice(); }

  FirstUse mode() const { return options_.mode; }
  const std::vector<FirstUseEvent>& events() const { return events_; }
  int tunings() const { return tunings_; }

 private:
  absl::StatusOr<RunRequest> Decide(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                                    const RunRequest& request, bool capturing);

  std::unique_ptr<GemmRunner> inner_;
  TuneOnFirstUseOptions options_;
  TacticCache cache_;
  std::vector<FirstUseEvent> events_;
  int tunings_ = 0;
};

// A CUDA runner on `device` in this mode, with the CUDA capture probe
// (cudaStreamIsCapturing). Defined only in the CUDA build (tune_on_first_use_cuda.cc).
absl::StatusOr<std::unique_ptr<TuneOnFirstUseRunner>> CreateTuneOnFirstUseRunner(int device,
                                                                                 TuneOnFirstUseOptions options);

}  // namespace mxdiff
