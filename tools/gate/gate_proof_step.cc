// Step 2: the transform proof (reference/fold_proof.h) over the raw scale bytes the checkpoint
// holds: every observed byte x 16 codes, ordinary against folded fp16 bits. Over the chosen
// layers' admitted GEMMs every pattern must be equal (else the admission rule let a differing
// byte through: failed); bytes only in refused GEMMs may differ, since folded never runs there.
#include "fmt/format.h"
#include "reference/fold_proof.h"
#include "tools/gate/gate_context.h"

namespace mxdiff::gate {
namespace {

void Add(ScaleHistogram& sum, const ScaleHistogram& add) {
  for (size_t raw = 0; raw < sum.size(); ++raw) sum[raw] += add[raw];
}

}  // namespace

absl::StatusOr<StepResult> RunProofStep(GateContext& context) {
  ScaleHistogram everything{}, admitted{};
  for (const checkpoint::KernelLayer& layer : context.audit.plan.layers) {
    Add(everything, checkpoint::JudgeLayer(context.audit, layer).histogram);
  }
  for (const GateLayer& layer : context.layers) {
    for (const GemmAudit* gemm : {&layer.w13, &layer.w2}) {
      if (gemm->admitted) Add(admitted, gemm->histogram);
    }
  }
  const FoldProof whole = ProveFoldOver(everything);
  const FoldProof over_admitted = ProveFoldOver(admitted);
  StepResult step{.step = GateStep::kProof};
  step.command = fmt::format("mxdiff transform-table  # the bytes: mxdiff audit --format=json {}",
                             fmt::join(context.options.paths, " "));
  step.details.push_back(fmt::format("every kernel layer of the checkpoint: {}", whole.Describe()));
  if (over_admitted.patterns == 0) {
    step.outcome = StepOutcome::kPassed;
    step.summary = fmt::format("{}; no chosen GEMM is admitted, so folded never runs on them", whole.Describe());
    return step;
  }
  step.details.push_back(fmt::format("the chosen layers' admitted GEMMs: {}", over_admitted.Describe()));
  step.outcome = over_admitted.Holds() ? StepOutcome::kPassed : StepOutcome::kFailed;
  step.summary = over_admitted.Holds()
                     ? fmt::format("{} (admitted GEMMs); {}", over_admitted.Describe(),
                                   whole.Holds() ? "every byte of the checkpoint too"
                                                 : "the differing bytes are only in refused GEMMs, where folded falls back")
                     : fmt::format("an admitted GEMM holds a byte whose transforms differ: {}", over_admitted.Describe());
  return step;
}

}  // namespace mxdiff::gate
