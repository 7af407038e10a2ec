// Step 4: exactness on the real layer. Per chosen layer, the CUDA MoE layer (kernels/moe_layer.h,
// through fuzz/checks/layer_device.h: the device calibrated first) gets the layer's weights,
// and per arm one capture, then --cases replays with new activations and routings, each compared
// stage by stage (W13, SwiGLU, W2, output: fuzz/checks/layer_compare.h) with the CPU reference
// of the routes that ran. The folded arm must fall back to ordinary exactly on the GEMMs the audit
// refused. The first difference is written as a fuzz_layer .case (where the layer fits that
// format) for `repro`. Without a device (no CUDA build, no GPU) the step is skipped.
#include <cstdlib>
#include <filesystem>
#include <random>

#include "fmt/format.h"
#include "fuzz/checks/layer_compare.h"
#include "fuzz/checks/layer_device.h"
#include "fuzz/driver/findings.h"
#include "fuzz/formats/layer_case_format.h"
#include "tools/gate/gate_context.h"
#include "tools/gate/gate_exactness.h"
#include "tools/gate/gate_inputs.h"
#include "reference/status_macros.h"

namespace mxdiff::gate {
using Outputs = std::vector<std::vector<uint16_t>>;

namespace {

absl::StatusOr<std::unique_ptr<MoeLayer>> DeviceLayer(const GateLayer& layer) {
  const checkpoint::MoeLayerWeights& w = *layer.weights;
  absl::StatusOr<std::unique_ptr<MoeLayer>> device =
      fuzz::CreateDeviceMoeLayer(MoeLayerConfig{.shape = w.shape(layer.top_k), .max_tokens = kGateMaxTokens});
  if (!device.ok()) return device.status();
  MXDIFF_RETURN_IF_ERROR((*device)->WriteWeights(MoeGemm::kW13, 0, w.w13_codes, w.w13_scales));
  MXDIFF_RETURN_IF_ERROR((*device)->WriteWeights(MoeGemm::kW2, 0, w.w2_codes, w.w2_scales));
  return device;
}

}  // namespace

// "" when each GEMM ran what the audit's verdict demands for the arm, else what went wrong.
std::string CheckRoutes(const GateLayer& layer, const MoeLayer& device, Transform arm, const MoeLayerRoutes& routes) {
  std::string problems;
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    const LayerAdmission& rank = gemm == MoeGemm::kW13 ? layer.w13_rank : layer.w2_rank;
    const Route& route = gemm == MoeGemm::kW13 ? routes.w13 : routes.w2;
    const bool device_admits = device.admission(gemm).admitted;
    const Transform want = arm == Transform::kFolded && rank.admitted ? Transform::kFolded : Transform::kOrdinary;
    if (device_admits != rank.admitted) {
      problems += fmt::format("{} {}: the kernels' admission ({}) disagrees with the rule on this rank's bytes ({}); ",
                              layer.name, MoeGemmName(gemm), device_admits, rank.admitted);
    }
    // A folded kernel not built for the pinned tactic runs ordinary (the route says folded-missing):
    // no wrong fallback, and the details show it.
    const bool missing = want == Transform::kFolded && route.reason == RouteReason::kFoldedMissing;
    if (route.variant != want && !missing) {
      problems += fmt::format("{} {} arm {}: ran {} where this rank's bytes demand {}; ", layer.name, MoeGemmName(gemm),
                              TransformName(arm), DescribeRoute(route), TransformName(want));
    }
  }
  return problems;
}

// A fuzz_layer case of the differing replay, written beside the report: its path, or why none.
std::string WriteLayerCase(const GateLayer& layer, Transform arm, const MoeLayerRoutes& routes, const MoeInputs& x,
                           const std::string& signature, const std::string& description, const std::string& dir) {
  const checkpoint::MoeLayerWeights& w = *layer.weights;
  if (w.hidden > fuzz::kLayerMaxHidden || w.intermediate > fuzz::kLayerMaxIntermediate ||
      w.experts > fuzz::kLayerMaxExperts) {
    return fmt::format("no .case: the layer (hidden {}, intermediate {}, {} experts) exceeds fuzz_layer's format "
                       "(hidden {}, intermediate {}, {} experts)", w.hidden, w.intermediate, w.experts,
                       fuzz::kLayerMaxHidden, fuzz::kLayerMaxIntermediate, fuzz::kLayerMaxExperts);
  }
  fuzz::LayerCase c;
  c.shape = w.shape(layer.top_k);
  c.max_tokens = kGateMaxTokens;
  c.request = arm == Transform::kFolded ? TransformRequest::kFolded : TransformRequest::kOrdinary;
  c.w13_tactic = routes.w13.tactic;
  c.w2_tactic = routes.w2.tactic;
  c.w13_codes = w.w13_codes;
  c.w13_scales = w.w13_scales;
  c.w2_codes = w.w2_codes;
  c.w2_scales = w.w2_scales;
  fuzz::LayerReplay replay;
  replay.tokens = x.tokens;
  replay.expert_ids = x.expert_ids;
  replay.weights = x.weights;
  replay.activations = x.activations;
  c.replays.push_back(std::move(replay));
  const absl::StatusOr<std::vector<uint8_t>> bytes = fuzz::EncodeLayerCase(c);
  if (!bytes.ok()) return fmt::format("no .case: {}", bytes.status().ToString());
  ::setenv("MXDIFF_FINDINGS_DIR", dir.c_str(), 1);
  const absl::StatusOr<std::string> path = fuzz::WriteFinding("fuzz_layer", *bytes, {signature, description});
  return path.ok() ? fmt::format("written {} (repro {})", *path, *path) : path.status().ToString();
}

namespace {

struct ArmResult {
  std::string failure{};  // "" when every replay was exact
  int replays = 0;
};

ArmResult ReplayArm(const GateContext& context, const GateLayer& layer, MoeLayer& device, Transform arm,
                    const MoeLayerRoutes& routes, StepModel model, Outputs& outputs) {
  const MoeShape shape = layer.weights->shape(layer.top_k);
  std::mt19937_64 random(context.options.seed ^ 0x9a7e5eedull);  // the same cases for every arm
  ArmResult result;
  for (int c = 0; c < context.options.cases; ++c) {
    const MoeInputs x = DrawMoeInputs(shape, CaseTokens(c, random), random);
    absl::Status status = device.SetInputs(x.tokens, x.activations, x.expert_ids, x.weights);
    absl::StatusOr<MoeReplay> replay = status.ok() ? device.Replay() : absl::StatusOr<MoeReplay>(status);
    MoeDeviceStages stages;
    if (replay.ok()) status = device.ReadStages(stages);
    const absl::StatusOr<MoeLayerStages> expected = ReferenceMoeLayer(
        x.Problem(shape, layer.weights->w13(), layer.weights->w2()), fuzz::MoeReferenceOptions(routes, kSwigluLimit, model));
    if (!replay.ok() || !status.ok() || !expected.ok()) {
      result.failure = fmt::format("case {}: {}", c, !replay.ok() ? replay.status().ToString()
                                                      : !status.ok() ? status.ToString() : expected.status().ToString());
      return result;
    }
    if (!(replay->routes.w13 == routes.w13) || !(replay->routes.w2 == routes.w2)) {
      result.failure = fmt::format("{} arm {} case {}: the replay ran W13 {}, W2 {}, not the captured routes", layer.name,
                                   TransformName(arm), c, DescribeRoute(replay->routes.w13), DescribeRoute(replay->routes.w2));
      return result;
    }
    const fuzz::StageDifference difference = fuzz::CompareMoeStages(shape, *expected, stages, x.tokens, false,
                                                                    routes.w13.tactic.cta_m, routes.w2.tactic.cta_m);
    std::vector<uint16_t> output(stages.output.begin(), stages.output.begin() + size_t(x.tokens) * size_t(shape.hidden));
    std::string between = outputs.size() > size_t(c) && outputs[size_t(c)] != output ? "output differs from the first arm" : "";
    if (!difference.empty() || !between.empty()) {
      const std::string what = !difference.empty() ? fmt::format("{}: {}", difference.stage, difference.description) : between;
      result.failure = fmt::format("{} arm {} case {} ({} tokens): {}; {}", layer.name, TransformName(arm), c, x.tokens, what,
                                   WriteLayerCase(layer, arm, routes, x, fmt::format("layer/mismatch/{}/gate", difference.empty() ? "arms" : difference.stage),
                                                  result.failure + what, context.findings_dir));
      return result;
    }
    if (outputs.size() <= size_t(c)) outputs.push_back(std::move(output));
    ++result.replays;
  }
  return result;
}

}  // namespace

absl::StatusOr<StepResult> RunExactnessStep(GateContext& context) {
  if (context.options.libraries()) return RunLibraryExactnessStep(context);
  StepResult step{.step = GateStep::kExactness, .outcome = StepOutcome::kPassed};
  step.command = GateCommandFor(context, fmt::format("--cases={} --fuzz-time={} --seed={}", context.options.cases,
                                                     context.options.fuzz_seconds, context.options.seed));
  const absl::StatusOr<fuzz::LayerDevice> device = fuzz::OpenLayerDevice();
  if (!device.ok()) {
    const bool none = device.status().code() == absl::StatusCode::kUnavailable;
    // Without a driver the CUDA runtime says "driver version is insufficient", which reads like an
    // old driver (tools/mxdiff/gpu_presence.h): say what it means.
    const bool driver = std::filesystem::exists("/proc/driver/nvidia/version");
    const std::string why = std::string(device.status().message());
    context.no_device_reason = none ? fmt::format("no CUDA device ({})", why.starts_with("built without CUDA") || driver
                                                                            ? why : "no NVIDIA driver is loaded")
                                    : fmt::format("the device cannot be used ({})", why);
    // A device whose arithmetic no step model matches leaves the reference no oracle: undecided.
    step.outcome = none ? StepOutcome::kSkipped : StepOutcome::kNoVerdict;
    step.summary = context.no_device_reason;
    return step;
  }
  context.gpu = device->name;
  int replays = 0;
  for (GateLayer& layer : context.layers) {
    if (layer.weights->w13_codes.empty()) {
      if (absl::Status loaded = LoadLayerWeights(context, layer); !loaded.ok()) return loaded;
    }
    absl::StatusOr<std::unique_ptr<MoeLayer>> moe = DeviceLayer(layer);
    if (!moe.ok()) {  // a device error, not bad input: undecided
      step.outcome = StepOutcome::kNoVerdict;
      step.summary = fmt::format("{}: the device MoE layer could not be set up: {}", layer.name, moe.status().ToString());
      return step;
    }
    Outputs outputs;
    for (Transform arm : context.options.arms) {
      const MoeLayerRequest request{.transform = arm == Transform::kFolded ? TransformRequest::kFolded : TransformRequest::kOrdinary};
      const absl::StatusOr<MoeLayerRoutes> routes = (*moe)->Capture(request);
      std::string failure = routes.ok() ? CheckRoutes(layer, **moe, arm, *routes)
                                        : fmt::format("{} arm {}: capture: {}", layer.name, TransformName(arm), routes.status().ToString());
      if (failure.empty()) {
        step.details.push_back(fmt::format("{} arm {}: W13 {}, W2 {}", layer.name, TransformName(arm),
                                           DescribeRoute(routes->w13), DescribeRoute(routes->w2)));
        const ArmResult result = ReplayArm(context, layer, **moe, arm, *routes, device->model, outputs);
        failure = result.failure;
        replays += result.replays;
      }
      if (!failure.empty()) {
        step.outcome = StepOutcome::kFailed;
        step.summary = failure;
        return step;
      }
    }
    if (context.layers.size() > 1) DropLayerWeights(layer);
    layer.exactness_ran = true;
    layer.exact_between_arms = context.options.arms.size() > 1;  // with one arm there is nothing between
  }
  const FuzzOutcome fuzzed = RunFuzzLayer(context);
  step.details.push_back(fuzzed.detail);
  if (fuzzed.findings) {
    step.outcome = StepOutcome::kFailed;
    step.summary = fuzzed.detail;
    return step;
  }
  step.summary = fmt::format("{} replays on {} ({}), every stage (W13, SwiGLU, W2, output) bit-exact against the CPU "
                             "reference of the routes that ran; every arm's outputs bit-identical; the folded arm ran "
                             "folded exactly on the GEMMs whose bytes on this rank are all admitted",
                             replays, device->name, StepModelName(device->model));
  return step;
}

}  // namespace mxdiff::gate
