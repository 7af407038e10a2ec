#include "kernels/tune_on_first_use.h"

#include <utility>

namespace mxdiff {

std::string_view FirstUseName(FirstUse mode) { return mode == FirstUse::kTune ? "tune" : "table"; }

std::optional<FirstUse> ParseFirstUse(std::string_view text) {
  if (text == "table") return FirstUse::kTable;
  if (text == "tune") return FirstUse::kTune;
  return std::nullopt;
}

std::string_view FirstUseSourceName(FirstUseSource source) {
  switch (source) {
    case FirstUseSource::kPinned:
      return "pinned";
    case FirstUseSource::kCached:
      return "cached";
    case FirstUseSource::kTable:
      return "table";
    case FirstUseSource::kTuneNow:
      return "tuned at first use";
    case FirstUseSource::kFallback:
      return "fallback (first use inside a capture: cannot tune)";
  }
  return "?";
}

FirstUseDecision DecideFirstUse(FirstUse mode, const std::optional<Tactic>& pinned, const std::optional<Tactic>& cached,
                                const Tactic& table, const Tactic& fallback, bool capturing) {
  if (pinned) return {FirstUseSource::kPinned, *pinned};
  if (cached) return {FirstUseSource::kCached, *cached};
  if (mode == FirstUse::kTable) return {FirstUseSource::kTable, table};
  if (capturing) return {FirstUseSource::kFallback, fallback};
  return {FirstUseSource::kTuneNow, table};
}

TuneOnFirstUseRunner::TuneOnFirstUseRunner(std::unique_ptr<GemmRunner> inner, TuneOnFirstUseOptions options)
    : inner_(std::move(inner)), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<PreparedLayer>> TuneOnFirstUseRunner::Prepare(int groups, int n, int k,
                                                                            std::span<const uint8_t> packed_codes,
                                                                            std::span<const uint8_t> scale_bytes) {
  return inner_->Prepare(groups, n, k, packed_codes, scale_bytes);
}

absl::StatusOr<RunRequest> TuneOnFirstUseRunner::Decide(const PreparedLayer& layer,
                                                        std::span<const int32_t> row_offsets,
                                                        const RunRequest& request, bool capturing) {
  if (request.tactic) return request;  // pinned: the mode cannot reach it (not logged either)
  const DispatchShape shape = ShapeOf(layer.n(), layer.k(), row_offsets);
  const Tactic table = inner_->DefaultTactic(layer.n(), layer.k(), row_offsets);
  FirstUseDecision decision = DecideFirstUse(options_.mode, std::nullopt, cache_.Find(DeviceName(), shape), table,
                                             options_.fallback.value_or(table), capturing);
  if (decision.source == FirstUseSource::kTuneNow) {
    ++tunings_;
    absl::StatusOr<Tactic> tuned = Tune(layer, row_offsets);
    if (!tuned.ok()) return tuned.status();
    decision.tactic = *tuned;
  }
  events_.push_back({shape, decision.source, decision.tactic});
  RunRequest decided = request;
  decided.tactic = decision.tactic;
  return decided;
}

absl::StatusOr<Route> TuneOnFirstUseRunner::Run(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                                                std::span<const uint16_t> activations, std::span<uint16_t> output,
                                                const RunRequest& request) {
  // Bad row offsets are the inner runner's error, before any tuning.
  if (row_offsets.size() != size_t(layer.groups()) + 1) return inner_->Run(layer, row_offsets, activations, output, request);
  absl::StatusOr<RunRequest> decided = Decide(layer, row_offsets, request, /*capturing=*/false);
  if (!decided.ok()) return decided.status();
  return inner_->Run(layer, row_offsets, activations, output, *decided);
}

absl::StatusOr<Route> TuneOnFirstUseRunner::RunOnDevice(const PreparedLayer& layer, const DeviceBatch& batch,
                                                        const RunRequest& request) {
  if (batch.row_offsets.size() != size_t(layer.groups()) + 1) return inner_->RunOnDevice(layer, batch, request);
  const bool capturing = options_.capturing && options_.capturing(batch.stream);
  absl::StatusOr<RunRequest> decided = Decide(layer, batch.row_offsets, request, capturing);
  if (!decided.ok()) return decided.status();
  return inner_->RunOnDevice(layer, batch, *decided);
}

absl::StatusOr<Tactic> TuneOnFirstUseRunner::Tune(const PreparedLayer& layer, std::span<const int32_t> row_offsets) {
  absl::StatusOr<Tactic> tuned = inner_->Tune(layer, row_offsets);
  if (tuned.ok()) cache_.Store(DeviceName(), ShapeOf(layer.n(), layer.k(), row_offsets), *tuned);
  return tuned;
}

Tactic TuneOnFirstUseRunner::DefaultTactic(int n, int k, std::span<const int32_t> row_offsets) const {
  if (std::optional<Tactic> cached = cache_.Find(DeviceName(), ShapeOf(n, k, row_offsets))) return *cached;
  return inner_->DefaultTactic(n, k, row_offsets);
}

}  // namespace mxdiff
