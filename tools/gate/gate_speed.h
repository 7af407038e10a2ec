// The speed step's decision (issue 18, step 5) and the model's per-token figures (step 6) from
// bench reports: the whole MoE layer's graph per chosen layer (tools/bench/layer_bench.h, us per
// layer, the checkpoint's sliced weights) and W13 / W2 alone (tools/bench/bench_driver.h, us per
// call). Each report holds the sound A B B A, the swapped and A/A controls and the naive protocol
// (tune on first use). Pure and CUDA-free, so the rule is tested on the CPU with synthetic reports.
//
// The rule (tools/gate/README.md): failed when any measurement says, soundly, that the candidate
// is slower or that a bit differs; passed only when the candidate is faster on the whole layer of
// every chosen layer where it runs (each layer's verdict "faster", so its swapped and A/A controls
// passed) and no measurement's control failed (too noisy, position effect, incomplete), W13 and
// W2 each faster or unresolved; else no verdict. The naive protocol's answer is shown beside the
// sound one and never decides.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/report.h"
#include "tools/gate/gate_verdict.h"

namespace mxdiff::gate {

// One protocol's per-call medians (us) and B - A with its interval.
struct ProtocolFigures {
  double a_us = 0;
  double b_us = 0;
  double difference_us = 0;
  double ci_low_us = 0;
  double ci_high_us = 0;
};
std::optional<ProtocolFigures> FiguresOf(const bench::ShapeReport& shape, bench::Protocol protocol);

// What a protocol's interval alone says: "faster", "slower", "no difference" (contains 0).
std::string_view AnswerOf(const ProtocolFigures& figures);

struct SpeedMeasurement {
  std::string name{};           // "layers.0" (a layer) or "W13 layers.0"
  bool layer = false;           // the whole layer's graph (us per layer), else one GEMM (us per call)
  bool candidate_runs = true;   // folded runs on some GEMM of it on this rank
  bench::ShapeReport report{};  // an error, or a shape that could not run: verdict incomplete
};

// The rule in one line, for the report.
inline constexpr std::string_view kSpeedRule =
    "failed when the sound protocol says the candidate is slower, or a bit differs, in any measurement (a whole layer, "
    "W13, W2); passed only when it is faster on the whole layer of every chosen layer where folded runs, with every "
    "control passing (swapped, A/A; none too noisy, position effect or incomplete) and W13 and W2 each faster or "
    "unresolved; else no verdict. The naive protocol (tune on first use) is shown beside it and never decides";

// What the candidate must be faster on: the whole layer (the builtin pair: the layer's graph is the
// unit the seed measured), or each timed GEMM (two kernel libraries: no layer graph runs them, so
// W13 and W2 alone are timed, and each must be faster).
enum class SpeedUnit : uint8_t { kLayer = 0, kGemm = 1 };

struct SpeedDecision {
  StepOutcome outcome = StepOutcome::kNoVerdict;
  std::string summary{};
  std::vector<std::string> details{};  // per measurement: the sound answer, the naive one beside it
};
SpeedDecision DecideSpeed(std::span<const SpeedMeasurement> measurements, SpeedUnit unit = SpeedUnit::kLayer);

// The model's us per token: the layer measurements' medians summed (sound and naive), beside the
// seed's projection (the first measured layer x the checkpoint's MoE layers), both protocols.
// Absent unless every layer measurement has sound figures.
struct PerToken {
  size_t measured_layers = 0;
  size_t moe_layers = 0;
  ProtocolFigures sound{};             // a_us, b_us summed; difference_us = b - a
  std::optional<ProtocolFigures> naive{};
  ProtocolFigures projection{};        // first layer x moe_layers, sound
  std::optional<ProtocolFigures> naive_projection{};  // the seed's method: naive, one layer x moe_layers
};
std::optional<PerToken> ModelPerToken(std::span<const SpeedMeasurement> measurements, size_t moe_layers);
std::string PerTokenLine(const PerToken& figures);

}  // namespace mxdiff::gate
