// What `mxdiff gate`'s steps share (issue 18): the options, the audit's verdict per MoE layer, the
// loaded weights, and what each step leaves for the next. The steps are one file each
// (gate_*_step.cc); each returns its StepResult, or an error for bad input (exit 2, one line
// naming the file, tensor or flag). tools/gate/README.md says what each step does.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/audit.h"
#include "checkpoint/expert_weights.h"
#include "fuzz/modules/gemm_module.h"
#include "reference/admission.h"
#include "reference/step_model.h"
#include "reference/transform.h"
#include "tools/bench/report.h"
#include "tools/gate/gate_speed.h"
#include "tools/gate/gate_verdict.h"

namespace mxdiff::gate {

struct GateOptions {
  std::vector<std::string> paths{};   // the checkpoint, as `mxdiff audit` takes it
  std::vector<std::string> layers{};  // MoE layers ("layers.0"); empty: the first one
  bool all_layers = false;          // --layers=all
  checkpoint::TensorParallel parallel{.tp = 1, .rank = 0};
  std::vector<Transform> arms{Transform::kOrdinary, Transform::kFolded};
  int cases = 256;         // exactness replays per arm and layer
  int cpu_cases = 3;       // CPU reference cases per layer (step 3)
  double fuzz_seconds = 60;
  double bench_budget_s = 5;  // per bench measurement
  // --speed_time: seconds for the whole-layer measurements of all chosen layers together, split
  // evenly over the layers and their 4 measurements (at least kMinLayerBudgetS, at most
  // bench_budget_s each); 0: bench_budget_s each.
  double speed_seconds = 0;
  uint64_t seed = 1;
  int device = 0;
  // --baseline_kernel / --candidate_kernel: two kernel libraries (fuzz/modules/mxdiff_kernel_abi.h)
  // in place of the builtin ordinary / folded pair, asked for the ordinary and the folded transform
  // under --ext_model's arithmetic; both empty: the builtin pair.
  std::string baseline_kernel{};
  std::string candidate_kernel{};
  StepModel kernel_model = StepModel::kSm90Emulated;
  bool libraries() const { return !baseline_kernel.empty(); }
};

// One kernel GEMM of an MoE layer as the audit judged it.
struct GemmAudit {
  std::string name{};   // "layers.0.ffn.experts.W13"
  bool found = false;  // the audit has this kernel layer
  bool admitted = false;
  std::string detail{};  // "refused: raw 112 at layers.0.ffn.experts.3.w3.scale [5, 2]", or problems
  ScaleHistogram histogram{};
};

struct GateLayer {
  std::string name{};  // "layers.0"
  GemmAudit w13{};
  GemmAudit w2{};
  std::optional<checkpoint::MoeLayerWeights> weights{};  // step 3
  int top_k = 0;
  // Step 3: the admission of this rank's slice of each GEMM (AdmitLayer over the bytes the kernels
  // are given), which decides what the folded arm runs on this rank. The audit judges the whole
  // tensor: a refused byte outside this rank's slice refuses the layer, not this rank's GEMM.
  LayerAdmission w13_rank{};
  LayerAdmission w2_rank{};
  // Step 4: every arm's replays bit-exact, and each arm's per-GEMM transform that ran.
  bool exact_between_arms = false;
  bool exactness_ran = false;
};

struct GateContext {
  GateOptions options;
  checkpoint::AuditResult audit{};
  std::vector<GateLayer> layers{};  // the chosen MoE layers, in checkpoint order
  size_t moe_layers = 0;          // MoE layers in the checkpoint (the seed's projection multiplies by it)
  std::string gpu{};                // "" where none
  std::string driver{};
  std::string no_device_reason{};   // why steps 4-5 were skipped ("" when a device was used)
  std::string findings_dir{};       // where a differing replay's .case goes (the report folder)
  std::vector<std::string> notes{};  // extra report lines (figures, fuzzing, the accuracy sentence)
  // Step 5: every measurement (W13, W2, then each chosen layer's whole graph) and the bench's
  // report of them all (per-round samples of both arms, every protocol: bench.json in the report).
  std::vector<SpeedMeasurement> speed{};
  bench::BenchReport bench{};
  // The two kernel libraries where options.libraries(), loaded before anything runs.
  std::unique_ptr<fuzz::GemmModule> baseline{};
  std::unique_ptr<fuzz::GemmModule> candidate{};
};

inline constexpr double kMinLayerBudgetS = 0.2;

// The budget of each whole-layer measurement (sound, swapped, A/A, naive) of `layers` layers.
inline double LayerBudgetSeconds(const GateOptions& o, size_t layers) {
  if (o.speed_seconds <= 0 || layers == 0) return o.bench_budget_s;
  const double share = o.speed_seconds / (4.0 * double(layers));
  return share < kMinLayerBudgetS ? kMinLayerBudgetS : share > o.bench_budget_s ? o.bench_budget_s : share;
}

// Seconds since `start`, for the per-step times.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The steps, in order. An error is bad input (exit 2).
absl::StatusOr<StepResult> RunAuditStep(GateContext& context);        // gate_audit_step.cc
absl::StatusOr<StepResult> RunProofStep(GateContext& context);        // gate_proof_step.cc
absl::StatusOr<StepResult> RunWeightsStep(GateContext& context);      // gate_weights_step.cc
absl::StatusOr<StepResult> RunExactnessStep(GateContext& context);    // gate_exactness_step.cc
absl::StatusOr<StepResult> RunSpeedStep(GateContext& context);        // gate_speed_step.cc

// Two kernel libraries (gate_libraries.cc). Load: both or neither flag, each a regular file that
// loads as a kernel library, not the same file, one ABI version (else bad input). Step 4 for them:
// each chosen layer's real weights through both, GEMM by GEMM, against the reference and each other.
absl::Status LoadKernelLibraries(GateContext& context);
absl::StatusOr<StepResult> RunLibraryExactnessStep(GateContext& context);

// With several layers chosen the weights are not all kept (V4: some 850 MB a layer at TP 4, 43
// layers): step 3 keeps each layer's shape and drops its arrays, step 4 loads them again for the
// layer it runs and drops them after. Load: the arrays of `layer` (an error is bad input).
absl::Status LoadLayerWeights(const GateContext& context, GateLayer& layer);
void DropLayerWeights(GateLayer& layer);  // keeps the shape fields

// "mxdiff gate PATHS --layers=<the chosen ones> --tp=T --rank=R --arms=A <extra>": a step's command.
std::string GateCommandFor(const GateContext& context, std::string_view extra);

// Step 4's fuzzing (gate_fuzz.cc): whether fuzz_layer found something, and the report line.
struct FuzzOutcome {
  bool findings = false;
  std::string detail{};
};
FuzzOutcome RunFuzzLayer(const GateContext& context);

// The top-k of the model: config.json's num_experts_per_tok beside the checkpoint, else
// DeepSeek V4's 6, at most the experts. `source` says which.
int ModelTopK(const std::vector<std::string>& paths, int experts, std::string& source);

}  // namespace mxdiff::gate
