// Step 3: the chosen layers' routed (and MXFP4 shared) experts loaded from the checkpoint and
// sliced for rank --rank of --tp (checkpoint/expert_weights.h), then the CPU reference MoE layer
// (reference/moe_layer.h) over a few decode cases of each: ordinary, and the folded arm (folded
// on an admitted GEMM, ordinary where the audit refused it), whose output bits must be equal.
#include <filesystem>
#include <fstream>
#include <random>

#include "fmt/format.h"
#include "checkpoint/model_config.h"
#include "nlohmann/json.hpp"
#include "tools/gate/gate_context.h"
#include "tools/gate/gate_inputs.h"

namespace mxdiff::gate {

int ModelTopK(const std::vector<std::string>& paths, int experts, std::string& source) {
  checkpoint::ModelTopK top_k = checkpoint::ReadModelTopK(paths, experts);
  source = std::move(top_k.source);
  return top_k.top_k;
}

namespace {

// What the folded arm runs on this rank's slice of a GEMM, and why.
std::string FoldedRuns(const GemmAudit& audit, const LayerAdmission& rank, const checkpoint::TensorParallel& parallel) {
  if (!rank.admitted) return fmt::format("ordinary (falls back: this rank's slice {})", rank.Describe());
  if (!audit.admitted) {
    return fmt::format("folded (the audit refused the whole tensor, but rank {} of {} holds none of its refused bytes; "
                       "the ranks that hold them fall back)", parallel.rank, parallel.tp);
  }
  return "folded (admitted)";
}

std::string SlicingText(const checkpoint::MoeLayerWeights& w) {
  const int tp = w.parallel.tp, rank = w.parallel.rank, i = w.intermediate;
  return fmt::format("TP {} rank {}: W13 column-parallel, rows [{}, {}) of w1 and of w3 (its N; each rank's SwiGLU "
                     "needs no other rank); W2 row-parallel, columns [{}, {}) of w2 (its K; the ranks' outputs are "
                     "summed by the all-reduce)",
                     tp, rank, rank * i, (rank + 1) * i, rank * i, (rank + 1) * i);
}

// The CPU reference over `cases` decode cases: ordinary, and folded where the audit admitted
// the GEMM; the number of cases whose outputs differ.
absl::StatusOr<int> ReferenceCases(const GateLayer& layer, int cases, uint64_t seed) {
  const checkpoint::MoeLayerWeights& w = *layer.weights;
  const MoeShape shape = w.shape(layer.top_k);
  std::mt19937_64 random(seed);
  int differing = 0;
  for (int c = 0; c < cases; ++c) {
    const MoeInputs inputs = DrawMoeInputs(shape, CaseTokens(c, random), random);
    const MoeLayerProblem problem = inputs.Problem(shape, w.w13(), w.w2());
    MoeLayerOptions ordinary, folded;
    folded.w13.transform = layer.w13_rank.admitted ? Transform::kFolded : Transform::kOrdinary;
    folded.w2.transform = layer.w2_rank.admitted ? Transform::kFolded : Transform::kOrdinary;
    absl::StatusOr<MoeLayerStages> a = ReferenceMoeLayer(problem, ordinary);
    if (!a.ok()) return a.status();
    absl::StatusOr<MoeLayerStages> b = ReferenceMoeLayer(problem, folded);
    if (!b.ok()) return b.status();
    differing += a->output == b->output ? 0 : 1;
  }
  return differing;
}

}  // namespace

absl::Status LoadLayerWeights(const GateContext& context, GateLayer& layer) {
  absl::StatusOr<checkpoint::MoeLayerWeights> loaded =
      checkpoint::LoadMoeLayerWeights(context.options.paths, layer.name, context.options.parallel);
  if (!loaded.ok()) return loaded.status();
  layer.weights = std::move(*loaded);
  return absl::OkStatus();
}

void DropLayerWeights(GateLayer& layer) {
  for (std::vector<uint8_t>* bytes : {&layer.weights->w13_codes, &layer.weights->w13_scales, &layer.weights->w2_codes,
                                      &layer.weights->w2_scales}) {
    std::vector<uint8_t>().swap(*bytes);
  }
}

absl::StatusOr<StepResult> RunWeightsStep(GateContext& context) {
  StepResult step{.step = GateStep::kRealWeights, .outcome = StepOutcome::kPassed};
  int differing = 0;
  for (size_t l = 0; l < context.layers.size(); ++l) {
    GateLayer& layer = context.layers[l];
    if (absl::Status loaded = LoadLayerWeights(context, layer); !loaded.ok()) return loaded;
    layer.w13_rank = AdmitLayer(layer.weights->w13_scales);
    layer.w2_rank = AdmitLayer(layer.weights->w2_scales);
    std::string top_k_source;
    layer.top_k = ModelTopK(context.options.paths, layer.weights->experts, top_k_source);
    const absl::StatusOr<int> differs = ReferenceCases(layer, context.options.cpu_cases, context.options.seed + l);
    if (!differs.ok()) return differs.status();
    differing += *differs;
    if (context.layers.size() > 1) DropLayerWeights(layer);
    const checkpoint::MoeLayerWeights& w = *layer.weights;
    step.details.push_back(fmt::format(
        "{}: {} routed experts{}, hidden {}, intermediate {} of {}; {}; top-k {} ({}); CPU reference ran {} cases "
        "(1..{} tokens): ordinary vs folded-where-admitted outputs {}; the folded arm runs W13 {}; W2 {}",
        layer.name, w.experts, w.shared_expert ? " + the shared expert" : fmt::format(" ({})", w.shared_note.empty() ? "no shared expert" : w.shared_note),
        w.hidden, w.intermediate, w.full_intermediate, SlicingText(w), layer.top_k, top_k_source,
        context.options.cpu_cases, kGateMaxTokens, *differs == 0 ? "bit-identical" : fmt::format("differ in {} cases", *differs),
        FoldedRuns(layer.w13, layer.w13_rank, w.parallel), FoldedRuns(layer.w2, layer.w2_rank, w.parallel)));
  }
  step.summary = fmt::format("{} MoE layer(s) loaded for TP {} rank {}; the CPU reference MoE layer ran {} cases each{}",
                             context.layers.size(), context.options.parallel.tp, context.options.parallel.rank,
                             context.options.cpu_cases,
                             differing == 0 ? ", ordinary and folded-where-admitted bit-identical"
                                            : fmt::format("; {} cases differ between the arms", differing));
  if (differing != 0) step.outcome = StepOutcome::kFailed;
  step.command = GateCommandFor(context, fmt::format("--seed={} --cases=1  # steps 1-3 run on any machine",
                                                     context.options.seed));
  return step;
}

}  // namespace mxdiff::gate
