// `mxdiff gate --baseline_kernel=LIB --candidate_kernel=LIB` (issue 36): two kernel libraries
// (fuzz/modules/mxdiff_kernel_abi.h, e.g. TurboMind ordinary and TurboMind folded) in place of the
// builtin ordinary / folded pair. Loading them (bad input before anything runs) and step 4 for
// them: the chosen layers' real, sliced weights through both libraries, GEMM by GEMM, each output
// held to the CPU reference of the plan the library ran and the two arms to each other.
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "fmt/format.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "kernels/moe_layer_plan.h"
#include "kernels/dispatch_table.h"
#include "reference/fp16.h"
#include "reference/reference_gemm.h"
#include "tools/gate/gate_context.h"
#include "tools/gate/gate_inputs.h"

namespace mxdiff::gate {
namespace {

// The split count a library is asked for comes from the dispatch table as sized for an H100
// (132 SMs), as the fuzz seeds' table tactics are; a v2 library reports the plan it ran instead.
constexpr int kPlanMultiprocessors = 132;

// The ABI version a library's descriptor declares (LoadExternalModule has accepted it already).
uint32_t AbiVersionOf(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return 0;
  const auto entry = reinterpret_cast<mxdiff_kernel_entry_fn>(dlsym(handle, MXDIFF_KERNEL_ENTRY_SYMBOL));
  const mxdiff_kernel* kernel = entry != nullptr ? entry() : nullptr;
  const uint32_t version = kernel != nullptr ? kernel->abi_version : 0;
  dlclose(handle);  // LoadExternalModule's handle keeps the library loaded
  return version;
}

struct Arm {
  std::string name;  // "baseline" or "candidate"
  fuzz::GemmModule* module = nullptr;
  Transform transform = Transform::kOrdinary;
};

// One GEMM of a decode case over the experts the case routes to (ascending; the shared expert
// last, owning every token), each group owning the rows of its tokens: what a grouped MoE GEMM
// computes. W13 takes the tokens' activations; W2 fresh ones (the SwiGLU output's stand-in), so
// each GEMM is judged on its own.
fuzz::FuzzCase GemmCase(const checkpoint::MoeLayerWeights& w, MoeGemm gemm, const MoeInputs& x, int top_k,
                        std::mt19937_64& random) {
  const bool w13 = gemm == MoeGemm::kW13;
  fuzz::FuzzCase c;
  c.n = w13 ? 2 * w.intermediate : w.hidden;
  c.k = w13 ? w.hidden : w.intermediate;
  const std::vector<uint8_t>& codes = w13 ? w.w13_codes : w.w2_codes;
  const std::vector<uint8_t>& scales = w13 ? w.w13_scales : w.w2_scales;
  const size_t code_bytes = size_t(c.n) * size_t(c.k) / 2, scale_bytes = size_t(c.n) * size_t(c.k) / kBlockK;
  std::vector<int> experts(x.expert_ids.begin(), x.expert_ids.end());
  std::sort(experts.begin(), experts.end());
  experts.erase(std::unique(experts.begin(), experts.end()), experts.end());
  if (w.shared_expert) experts.push_back(w.experts);  // loaded as the last group
  std::normal_distribution<float> normal(0.0f, 1.0f);
  c.groups = int(experts.size());
  c.row_offsets = {0};
  for (const int expert : experts) {
    for (int token = 0; token < x.tokens; ++token) {
      const auto slots = x.expert_ids.begin() + ptrdiff_t(token) * top_k;
      if (expert != w.experts && std::find(slots, slots + top_k, expert) == slots + top_k) continue;
      for (int i = 0; i < c.k; ++i) {
        c.activations.push_back(w13 ? x.activations[size_t(token) * size_t(c.k) + size_t(i)]
                                    : f32_to_f16_rne(normal(random)));
      }
    }
    c.row_offsets.push_back(int32_t(c.activations.size() / size_t(c.k)));
    c.packed_codes.insert(c.packed_codes.end(), codes.begin() + ptrdiff_t(size_t(expert) * code_bytes),
                          codes.begin() + ptrdiff_t(size_t(expert + 1) * code_bytes));
    c.scale_bytes.insert(c.scale_bytes.end(), scales.begin() + ptrdiff_t(size_t(expert) * scale_bytes),
                         scales.begin() + ptrdiff_t(size_t(expert + 1) * scale_bytes));
  }
  c.tactic = TableTactic(ShapeOf(c.n, c.k, c.row_offsets), kPlanMultiprocessors);
  c.policy = FallbackPolicy::kFailClosed;  // the arm's transform or nothing: the gate chose it
  return c;
}

struct ArmRun {
  std::string failure{};  // "" when exact
  bool declined = false;  // UNSUPPORTED: the GEMM was not checked, which is no verdict, not a failure
  std::string plan{};     // the plan the reference was computed for
};

// Runs `arm` on the case and holds its output to the reference of the plan it ran.
ArmRun RunArm(const Arm& arm, fuzz::FuzzCase c, StepModel model, std::vector<uint16_t>& output) {
  c.request = arm.transform == Transform::kFolded ? TransformRequest::kFolded : TransformRequest::kOrdinary;
  c.model = model;
  output.assign(size_t(c.rows()) * size_t(c.n), 0x7E01);  // a NaN no sum produces: an unwritten element shows
  const absl::StatusOr<Route> route = arm.module->Run(c, c.tactic, output);
  if (!route.ok()) {
    const bool declined = route.status().code() == absl::StatusCode::kUnimplemented;
    return {.failure = fmt::format("the {} library ({}) {}: {}", arm.name, arm.module->name(),
                                   declined ? "declined the GEMM (UNSUPPORTED)" : "failed",
                                   std::string(route.status().message())),
            .declined = declined};
  }
  ReferenceOptions options{.transform = arm.transform, .model = model, .tactic = c.tactic};
  if (const std::optional<fuzz::RanPlan> ran = arm.module->ReportedPlan(); ran) {
    options.tactic.cta_k = ran->cta_k;
    options.tactic.splits = ran->splits;
  }
  ArmRun run{.plan = fmt::format("cta_k {} splits {}", options.tactic.cta_k, options.tactic.splits)};
  std::vector<uint16_t> expected;
  if (absl::Status status = ReferenceGemm(c.Problem(), options, expected); !status.ok()) {
    run.failure = fmt::format("the reference refuses the {} library's plan ({}): {}", arm.name, run.plan,
                              std::string(status.message()));
    return run;
  }
  const auto differs = std::mismatch(output.begin(), output.end(), expected.begin());
  if (differs.first == output.end()) return run;
  const size_t at = size_t(differs.first - output.begin());
  run.failure = fmt::format("the {} library ({}, {} {}) differs from the reference at [{}][{}]: 0x{:04x}, expected 0x{:04x}",
                            arm.name, arm.module->name(), TransformName(arm.transform), run.plan, at / size_t(c.n),
                            at % size_t(c.n), *differs.first, *differs.second);
  return run;
}

}  // namespace

absl::Status LoadKernelLibraries(GateContext& context) {
  const GateOptions& o = context.options;
  if (o.baseline_kernel.empty() != o.candidate_kernel.empty()) {
    return absl::InvalidArgumentError("--baseline_kernel and --candidate_kernel go together (two kernel libraries "
                                      "in place of the builtin ordinary and folded kernels)");
  }
  if (!o.libraries()) return absl::OkStatus();
  for (const auto& [flag, path] : {std::pair{"--baseline_kernel", &o.baseline_kernel},
                                   std::pair{"--candidate_kernel", &o.candidate_kernel}}) {
    std::error_code error;
    if (!std::filesystem::exists(*path, error)) return absl::InvalidArgumentError(fmt::format("{}={}: no such file", flag, *path));
    if (!std::filesystem::is_regular_file(*path, error)) {
      return absl::InvalidArgumentError(fmt::format("{}={}: not a regular file (a kernel library is a shared object)",
                                                    flag, *path));
    }
  }
  std::error_code error;
  if (std::filesystem::equivalent(o.baseline_kernel, o.candidate_kernel, error)) {
    return absl::InvalidArgumentError(fmt::format("--baseline_kernel and --candidate_kernel are the same file ({}): "
                                                  "the gate compares two kernel libraries", o.candidate_kernel));
  }
  for (const auto& [flag, path, module] :
       {std::tuple{"--baseline_kernel", &o.baseline_kernel, &context.baseline},
        std::tuple{"--candidate_kernel", &o.candidate_kernel, &context.candidate}}) {
    absl::StatusOr<std::unique_ptr<fuzz::GemmModule>> loaded = fuzz::LoadExternalModule(*path);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}={}: {}", flag, *path, std::string(loaded.status().message())));
    }
    *module = *std::move(loaded);
  }
  const uint32_t baseline_abi = AbiVersionOf(o.baseline_kernel), candidate_abi = AbiVersionOf(o.candidate_kernel);
  if (baseline_abi != candidate_abi) {
    return absl::InvalidArgumentError(fmt::format(
        "--baseline_kernel={} speaks kernel ABI v{}, --candidate_kernel={} v{}: the gate holds both to the plans they "
        "report, so both must speak one version", o.baseline_kernel, baseline_abi, o.candidate_kernel, candidate_abi));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> RunLibraryExactnessStep(GateContext& context) {
  StepResult step{.step = GateStep::kExactness, .outcome = StepOutcome::kPassed};
  const GateOptions& o = context.options;
  step.command = GateCommandFor(context, fmt::format("--cases={} --seed={}", o.cases, o.seed));
  int gemms = 0;
  for (GateLayer& layer : context.layers) {
    if (layer.weights->w13_codes.empty()) {
      if (absl::Status loaded = LoadLayerWeights(context, layer); !loaded.ok()) return loaded;
    }
    const checkpoint::MoeLayerWeights& w = *layer.weights;
    const Arm baseline{"baseline", context.baseline.get(), Transform::kOrdinary};
    const Arm candidate{"candidate", context.candidate.get(), Transform::kFolded};
    std::mt19937_64 random(o.seed ^ 0x11b5eedull);
    for (int c = 0; c < o.cases; ++c) {
      const MoeInputs x = DrawMoeInputs(w.shape(layer.top_k), CaseTokens(c, random), random);
      for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
        const fuzz::FuzzCase gemm_case = GemmCase(w, gemm, x, layer.top_k, random);
        // A GEMM with a byte this rank's fold cannot take runs ordinary in the candidate's
        // deployment too: the baseline library is that fallback.
        const bool folds = (gemm == MoeGemm::kW13 ? layer.w13_rank : layer.w2_rank).admitted;
        std::vector<uint16_t> ordinary, candidate_output;
        ArmRun a = RunArm(baseline, gemm_case, o.kernel_model, ordinary), b;
        if (a.failure.empty() && folds) b = RunArm(candidate, gemm_case, o.kernel_model, candidate_output);
        std::string failure = !a.failure.empty() ? a.failure : b.failure;
        if (failure.empty() && folds && candidate_output != ordinary) {
          failure = fmt::format("the candidate's output differs from the baseline's (both exact for their plans: {} "
                                "and {})", a.plan, b.plan);
        }
        if (!failure.empty()) {
          step.outcome = a.declined || b.declined ? StepOutcome::kNoVerdict : StepOutcome::kFailed;
          step.summary = fmt::format("{} {} case {} ({} tokens, {} experts): {}", layer.name, MoeGemmName(gemm), c,
                                     x.tokens, gemm_case.groups, failure);
          return step;
        }
        if (c == 0) {
          step.details.push_back(fmt::format("{} {}: baseline {} ordinary ({}); {}", layer.name, MoeGemmName(gemm),
                                             baseline.module->name(), a.plan,
                                             folds ? fmt::format("candidate {} folded ({})", candidate.module->name(), b.plan)
                                                   : "refused on this rank: the candidate falls back to the baseline"));
        }
        ++gemms;
      }
    }
    if (context.layers.size() > 1) DropLayerWeights(layer);
    layer.exactness_ran = true;
    layer.exact_between_arms = true;
  }
  step.summary = fmt::format("{} GEMMs ({} cases x W13, W2 per layer, the real weights of the routed experts) through "
                             "the baseline ({}) and the candidate ({}) under {}: each bit-exact against the CPU "
                             "reference of the plan it ran, the candidate's output bit-identical to the baseline's "
                             "wherever this rank folds",
                             gemms, o.cases, context.baseline->name(), context.candidate->name(),
                             StepModelName(o.kernel_model));
  return step;
}

}  // namespace mxdiff::gate
