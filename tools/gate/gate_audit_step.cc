// Step 1: the checkpoint audit (checkpoint/audit.h) over the whole checkpoint, its verdict per
// kernel layer with the first refused positions, and the MoE layers the gate runs on. No rule
// here: the verdicts are JudgeLayer's.
#include <algorithm>
#include <optional>

#include "fmt/format.h"
#include "tools/gate/gate_context.h"

namespace mxdiff::gate {
namespace {

// "raw 112 at layers.0.ffn.experts.3.w3.scale [5, 2]" for each of the first refused bytes.
std::string RefusalText(const checkpoint::AuditResult& result, const checkpoint::LayerVerdict& verdict) {
  std::vector<std::string> parts;
  for (const checkpoint::LayerRefusal& refusal : verdict.first_refused) {
    const checkpoint::ScaleTensor& scale = result.plan.scales[refusal.scale];
    const std::vector<uint64_t> position =
        checkpoint::Coordinates(refusal.index, result.checkpoint.tensor(scale.ref).shape);
    parts.push_back(fmt::format("raw {} at {} [{}]", refusal.raw, scale.name, fmt::join(position, ", ")));
    if (parts.size() == 3) break;
  }
  std::string text = fmt::format("refused: {} scale bytes outside the admitted set", verdict.refused_bytes);
  if (!parts.empty()) text += fmt::format(", first {}", fmt::join(parts, "; "));
  for (const checkpoint::LayerProblem& problem : verdict.problems) text += fmt::format("; {}", problem.message);
  return text;
}

GemmAudit JudgeGemm(const checkpoint::AuditResult& result, const std::string& name) {
  GemmAudit gemm{.name = name};
  for (const checkpoint::KernelLayer& layer : result.plan.layers) {
    if (layer.name != name) continue;
    const checkpoint::LayerVerdict verdict = checkpoint::JudgeLayer(result, layer);
    gemm.found = true;
    gemm.admitted = verdict.admitted;
    gemm.histogram = verdict.histogram;
    gemm.detail = verdict.admitted ? "admitted" : RefusalText(result, verdict);
  }
  if (!gemm.found) gemm.detail = "not a kernel layer of the audit";
  return gemm;
}

// The chosen MoE layers, or NotFound naming the one the checkpoint lacks.
absl::StatusOr<std::vector<std::string>> ChosenLayers(const GateContext& context) {
  const std::vector<std::string> known = checkpoint::MoeLayersOf(context.audit.checkpoint);
  if (known.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: no MoE layer (no {{layer}}.ffn.experts.{{e}}.w1.weight)",
                                                  fmt::join(context.options.paths, " ")));
  }
  std::vector<std::string> sorted = known;
  std::sort(sorted.begin(), sorted.end(), checkpoint::NaturalLess);
  if (context.options.all_layers) return sorted;
  if (context.options.layers.empty()) return std::vector<std::string>{sorted.front()};
  for (const std::string& layer : context.options.layers) {
    if (std::find(known.begin(), known.end(), layer) == known.end()) {
      return absl::NotFoundError(fmt::format("--layers: {} is not an MoE layer of the checkpoint (it has {})", layer,
                                             fmt::join(sorted, ", ")));
    }
  }
  return context.options.layers;
}

}  // namespace

absl::StatusOr<StepResult> RunAuditStep(GateContext& context) {
  checkpoint::AuditOptions options;
  context.audit = checkpoint::RunAudit(context.options.paths, options);
  if (!context.audit.errors.empty()) return absl::InvalidArgumentError(context.audit.errors.front().message);
  if (const std::optional<checkpoint::NoKernelLayer> none = checkpoint::FindNoKernelLayer(context.audit)) {
    return absl::InvalidArgumentError(none->message);
  }
  absl::StatusOr<std::vector<std::string>> chosen = ChosenLayers(context);
  if (!chosen.ok()) return chosen.status();
  context.moe_layers = checkpoint::MoeLayersOf(context.audit.checkpoint).size();
  size_t refused = 0;
  std::vector<std::string> lines;
  for (const checkpoint::KernelLayer& layer : context.audit.plan.layers) {
    const checkpoint::LayerVerdict verdict = checkpoint::JudgeLayer(context.audit, layer);
    refused += verdict.admitted ? 0 : 1;
    if (!verdict.admitted) lines.push_back(fmt::format("{} {}", layer.name, RefusalText(context.audit, verdict)));
  }
  for (const std::string& name : *chosen) {
    GateLayer layer{.name = name};
    layer.w13 = JudgeGemm(context.audit, name + ".ffn.experts.W13");
    layer.w2 = JudgeGemm(context.audit, name + ".ffn.experts.W2");
    context.layers.push_back(std::move(layer));
  }
  StepResult step{.step = GateStep::kAudit, .outcome = StepOutcome::kPassed};
  step.summary = fmt::format("{} kernel layers, {} admitted, {} refused (folded falls back to ordinary on a refused "
                             "one); MoE layers chosen: {}",
                             context.audit.plan.layers.size(), context.audit.plan.layers.size() - refused, refused,
                             fmt::join(*chosen, ", "));
  step.details = std::move(lines);
  step.command = fmt::format("mxdiff audit --format=json {}", fmt::join(context.options.paths, " "));
  return step;
}

}  // namespace mxdiff::gate
