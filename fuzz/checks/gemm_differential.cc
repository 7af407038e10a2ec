#include "fuzz/checks/gemm_differential.h"

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/formats/tensor_recipe.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/mutators/fuzz_rules.h"
#include "fuzz/driver/coverage_counters.h"
#include "kernels/gemm_runner.h"
#include "reference/admission.h"
#include "reference/decode_shapes.h"
#include "reference/hash.h"
#include "reference/reference_gemm.h"
#include "reference/scale_class.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

// Cases up to this many multiply-adds also get the reference's own determinism check.
constexpr double kCpuSideWork = double(1 << 22);

std::string TacticSignature(const FuzzCase& c, const Tactic& t) {
  return fmt::format("{}x{}x{}/s{}", t.cta_m, t.cta_n, t.cta_k, effective_splits(c.k, t.cta_k, t.splits));
}

bool SameRouteButSwizzle(const Route& a, const Route& b) {
  Tactic a_tactic = a.tactic;
  a_tactic.swizzle = b.tactic.swizzle;
  return a.variant == b.variant && a.reason == b.reason && a_tactic == b.tactic;
}

std::string RouteOrError(const absl::StatusOr<Route>& route) {
  // Without payloads: an external kernel's failure kind (external_module.h) is in the signature.
  return route.ok() ? DescribeRoute(*route) : route.status().ToString(absl::StatusToStringMode::kWithNoExtraData);
}

}  // namespace

std::string ScaleClassOfColumn(const FuzzCase& c, std::span<const uint8_t> scale_bytes, int row, int column) {
  const size_t blocks = size_t(c.k) / kBlockK;
  const size_t first = (size_t(c.group_of_row(row)) * size_t(c.n) + size_t(column)) * blocks;
  ScaleClass most_unusual = ScaleClass::kAdmitted;
  for (size_t b = 0; b < blocks; ++b) most_unusual = std::min(most_unusual, ClassifyScale(scale_bytes[first + b]));
  return std::string(ScaleClassName(most_unusual));
}

int F16UlpDistance(uint16_t a, uint16_t b) {
  if (f16_is_nan(a) || f16_is_nan(b)) return a == b ? 0 : 65536;
  auto ordered = [](uint16_t h) { return (h & 0x8000) ? -int(h & 0x7FFF) : int(h); };
  return std::abs(ordered(a) - ordered(b));
}

std::string F16DistanceText(uint16_t a, uint16_t b) {
  if (f16_is_nan(a) && f16_is_nan(b)) return "a NaN payload difference";
  if (f16_is_nan(a) || f16_is_nan(b)) return "NaN against a number";
  return fmt::format("{} ulp", F16UlpDistance(a, b));
}

const CheckVerdict* CaseEvaluation::FirstFinding() const {
  for (const CheckVerdict& verdict : verdicts) {
    if (verdict.finding) return &verdict;
  }
  return nullptr;
}

GemmDifferential::GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules,
                                   std::unique_ptr<ReferenceOracle> device_oracle, OracleSettings settings)
    : modules_(std::move(modules)), device_oracle_(std::move(device_oracle)), settings_(settings) {}

bool AboveDeviceWork(const FuzzCase& c, const OracleSettings& settings) {
  const double work = double(c.rows()) * double(c.n) * double(c.k);
  const double weights = double(c.groups) * double(c.n) * double(c.k);
  // A case without rows stays where it always went (the device way was never run without them).
  return work > settings.device_above_work || (c.rows() > 0 && weights > settings.device_above_work);
}

ShapeClass ShapeClassOf(const FuzzCase& c) {
  bool decode_shape = false;
  for (const DecodeShape& shape : kDecodeShapes) decode_shape |= shape.n == c.n && shape.k == c.k;
  int experts_with_rows = 0, most_rows = 0;
  for (int g = 0; g < c.groups; ++g) {
    const int rows = c.row_offsets[g + 1] - c.row_offsets[g];
    experts_with_rows += rows > 0;
    most_rows = std::max(most_rows, rows);
  }
  const bool decode = decode_shape && c.groups <= kRoutedExperts && experts_with_rows >= 1 &&
                      experts_with_rows <= kDecodeTopK && most_rows <= 8;
  if (decode) return ShapeClass::kDecode;
  return AboveDeviceWork(c, OracleSettings{}) ? ShapeClass::kHuge : ShapeClass::kSmall;
}

std::string CountersText(const DifferentialCounters& n) {
  std::string seconds;
  for (size_t phase = 0; phase < kPhaseCount; ++phase) {
    seconds += fmt::format("seconds_{} {:.3f}\n", kPhaseNames[phase], n.seconds[phase]);
  }
  for (size_t shape = 0; shape < std::size(kShapeClassNames); ++shape) {
    seconds += fmt::format("shape_seconds_{} {:.3f}\n", kShapeClassNames[shape], n.seconds_by_shape[shape]);
  }
  for (size_t shape = 0; shape < std::size(kShapeClassNames); ++shape) {
    for (size_t phase = 0; phase < kPhaseCount; ++phase) {
      seconds += fmt::format("shape_phase_seconds_{}_{} {:.3f}\n", kShapeClassNames[shape], kPhaseNames[phase],
                             n.phase_seconds_by_shape[shape][phase]);
    }
  }
  return fmt::format(
      "cases {}\nsmall {}\ndecode {}\nhuge {}\nelements {}\ncpu {}\ndevice {}\ncpu_checked {}\nfallbacks {}\n"
      "refused {}\ndisagreements {}\nruns_refused {}\ndevice_materialized {}\nhost_weights_skipped {}\n"
      "host_weights_late {}\n",
      n.cases, n.cases_by_shape[0], n.cases_by_shape[1], n.cases_by_shape[2], n.elements_compared, n.cases_cpu,
      n.cases_device, n.cases_cpu_checked, n.device_fallbacks, n.device_refused, n.oracle_disagreements,
      n.runs_refused, n.cases_device_materialized, n.host_weights_skipped, n.host_weights_late) +
         seconds;
}

bool GoesDeviceWay(const FuzzCase& c, const OracleSettings& settings, const ReferenceOracle* oracle) {
  return oracle != nullptr && settings.cpu_check_every > 0 && AboveDeviceWork(c, settings) &&
         oracle->MaterializesRecipes() && WeightsFromRecipes(c);
}

bool CpuCheckSampled(const FuzzCase& c, int every) {
  if (every <= 1) return true;
  uint64_t hash = kFnv1a64Basis;  // FNV-1a over the encoding, then a SplitMix64 finalizer
  auto mix = [&](const uint8_t* bytes, size_t size) {
    for (size_t i = 0; i < size; ++i) hash = Fnv1a64Mix(hash, bytes[i]);
  };
  if (absl::StatusOr<std::vector<uint8_t>> encoded = EncodeCase(c); encoded.ok()) {
    mix(encoded->data(), encoded->size());
  } else {  // not encodable (a payload over the format's limit): its materialized tensors
    mix(reinterpret_cast<const uint8_t*>(c.activations.data()), c.activations.size() * sizeof(uint16_t));
    mix(c.packed_codes.data(), c.packed_codes.size());
    mix(c.scale_bytes.data(), c.scale_bytes.size());
  }
  hash = SplitMix64::Finalize(hash);
  return hash % uint64_t(every) == 0;
}

absl::StatusOr<GemmDifferential::ReferenceBits*> GemmDifferential::Reference(const FuzzCase& c, Transform transform,
                                                                            StepModel model, const Tactic& tactic,
                                                                            CaseEvaluation& evaluation,
                                                                            bool cpu_only) {
  // On an admitted layer both transforms dequantize every weight to the same bits (that is
  // what admission means), so the folded reference is the ordinary one: computed once.
  if (transform == Transform::kFolded && layer_admitted_) transform = Transform::kOrdinary;
  const ReferenceKey key{transform, model, tactic.cta_k, effective_splits(c.k, tactic.cta_k, tactic.splits)};
  auto found = reference_cache_.find(key);
  if (found != reference_cache_.end()) {
    if (cpu_only && found->second.unconfirmed) {
      if (absl::Status status = ConfirmOnCpu(c, found->second, evaluation); !status.ok()) return status;
    }
    return &found->second;
  }
  ReferenceBits entry;
  entry.options.transform = transform;
  entry.options.model = model;
  entry.options.tactic.cta_k = tactic.cta_k;
  entry.options.tactic.splits = tactic.splits;
  if (case_.large && !cpu_only) {
    // The device way: the oracle's own materialization of the recipes (same bits, no weights
    // copied); else the host's tensors of the groups with rows.
    absl::Status status;
    if (case_.device_way) {
      PhaseTimer timer(counters_.seconds_in(Phase::kDeviceReference));
      status = device_oracle_->GemmCase(c, entry.options, entry.bits);
    } else {
      const GroupedProblem problem = OracleProblem(c);
      PhaseTimer timer(counters_.seconds_in(Phase::kDeviceReference));
      status = device_oracle_->Gemm(problem, entry.options, entry.bits);
    }
    if (status.ok()) {
      case_.on_device = true;
      case_.device_materialized |= case_.device_way;
      entry.unconfirmed = true;
      ReferenceBits& stored = reference_cache_.emplace(key, std::move(entry)).first->second;
      if (case_.sampled) {
        if (absl::Status confirmed = ConfirmOnCpu(c, stored, evaluation); !confirmed.ok()) return confirmed;
      }
      return &stored;
    }
    // Never a skipped check: the case goes to the CPU reference. No device or no memory is no
    // finding; any other CUDA error is the oracle's own (a sticky one must not be blamed on a kernel).
    NoteDeviceFallback(status);
    entry.bits.clear();
    if (status.code() == absl::StatusCode::kInternal) {
      evaluation.verdicts.push_back({kCheckNames[kDeviceVsCpuCheck], device_oracle_->name(),
                                     Finding{"oracle/device-error", fmt::format("the {} failed: {}",
                                                                                device_oracle_->name(),
                                                                                status.ToString())}});
    }
  }
  case_.on_cpu = true;
  if (absl::Status status = CpuReference(c, entry.options, entry.bits); !status.ok()) return status;
  return &reference_cache_.emplace(key, std::move(entry)).first->second;
}

void GemmDifferential::NoteDeviceFallback(const absl::Status& status) {
  (status.code() == absl::StatusCode::kResourceExhausted ? case_.refused : case_.fell_back) = true;
  last_fallback_ = status.ToString();
}

GroupedProblem GemmDifferential::OracleProblem(const FuzzCase& c) {
  const std::vector<int> groups = c.GroupsWithRows();
  const bool codes_from_recipe = c.packed_codes.empty() && c.recipe(TensorKind::kCodes).has_value();
  if (!case_.weights_deferred && (groups.empty() || int(groups.size()) == c.groups)) return c.Problem();
  if (!compact_.ready) {
    const std::span<const uint8_t> scale_bytes = HostScales(c);
    PhaseTimer timer(counters_.seconds_in(Phase::kDecode));
    const size_t codes = size_t(c.n) * size_t(c.k) / 2, scales = size_t(c.n) * size_t(c.k) / kBlockK;
    compact_.groups = int(groups.size());
    compact_.row_offsets.assign(1, 0);
    compact_.codes.resize(groups.size() * codes);
    compact_.scales.resize(groups.size() * scales);
    case_.weights_late |= codes_from_recipe;
    for (size_t i = 0; i < groups.size(); ++i) {
      const int g = groups[i];
      compact_.row_offsets.push_back(compact_.row_offsets.back() + c.row_offsets[g + 1] - c.row_offsets[g]);
      const std::span<uint8_t> group_codes(compact_.codes.data() + i * codes, codes);
      if (codes_from_recipe) {
        MaterializeCodeSlice(*c.recipe(TensorKind::kCodes), uint64_t(g) * codes * 2, group_codes);
      } else {
        std::copy_n(c.packed_codes.begin() + ptrdiff_t(size_t(g) * codes), codes, group_codes.begin());
      }
      std::copy_n(scale_bytes.begin() + ptrdiff_t(size_t(g) * scales), scales,
                  compact_.scales.begin() + ptrdiff_t(i * scales));
    }
    compact_.ready = true;
  }
  GroupedProblem problem = c.Problem();
  problem.groups = compact_.groups;
  problem.row_offsets = compact_.row_offsets;
  problem.packed_codes = compact_.codes;
  problem.scale_bytes = compact_.scales;
  return problem;
}

absl::Status GemmDifferential::ConfirmOnCpu(const FuzzCase& c, ReferenceBits& entry, CaseEvaluation& evaluation) {
  std::vector<uint16_t> cpu;
  if (absl::Status status = CpuReference(c, entry.options, cpu); !status.ok()) return status;
  case_.cpu_checked = true;
  entry.unconfirmed = false;
  size_t differ = 0, first = cpu.size();
  for (size_t i = 0; i < cpu.size() && i < entry.bits.size(); ++i) {
    if (cpu[i] == entry.bits[i]) continue;
    first = std::min(first, i);
    ++differ;
  }
  CheckResult finding;
  if (cpu.size() != entry.bits.size() || differ > 0) {
    ++counters_.oracle_disagreements;
    const size_t at = first < cpu.size() ? first : 0;
    finding = Finding{
        "oracle/device-vs-cpu",
        cpu.size() != entry.bits.size()
            ? fmt::format("the {} gave {} output elements, the CPU reference {}", device_oracle_->name(),
                          entry.bits.size(), cpu.size())
            : fmt::format("the {} ({} {}, cta_k {}, splits {}) differs from the CPU reference in {} of {} "
                          "elements; the first, [{}][{}]: 0x{:04x}, the CPU reference says 0x{:04x} ({})",
                          device_oracle_->name(), TransformName(entry.options.transform),
                          StepModelName(entry.options.model), entry.options.tactic.cta_k,
                          entry.options.tactic.splits, differ, cpu.size(), at / size_t(c.n), at % size_t(c.n),
                          entry.bits[at], cpu[at], F16DistanceText(entry.bits[at], cpu[at]))};
  }
  evaluation.verdicts.push_back({kCheckNames[kDeviceVsCpuCheck], device_oracle_->name(), std::move(finding)});
  entry.bits = std::move(cpu);  // the kernels are judged on the CPU's bits
  return absl::OkStatus();
}

CheckResult GemmDifferential::CheckCpuSide(const FuzzCase& c, CaseEvaluation& evaluation) {
  // The GPU side's oracle is only as good as its determinism across thread counts.
  layer_admitted_ = false;  // compute both transforms here
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    ReferenceOptions options;
    options.transform = transform;
    options.model = c.model;
    options.tactic = c.tactic;
    options.threads = 1;
    std::vector<uint16_t> single;
    absl::Status status = CpuReference(c, options, single);
    absl::StatusOr<ReferenceBits*> multi = Reference(c, transform, c.model, c.tactic, evaluation, /*cpu_only=*/true);
    if (!status.ok() || !multi.ok()) {
      return Finding{"reference/rejected-valid-case",
                     fmt::format("ReferenceGemm: {}", status.ok() ? multi.status().ToString() : status.ToString())};
    }
    if (single != (*multi)->bits) {
      return Finding{fmt::format("nondeterminism/reference/{}", TransformName(transform)),
                     "the reference gives different bits single-threaded and multi-threaded"};
    }
  }
  return std::nullopt;
}

absl::Status GemmDifferential::CpuReference(const FuzzCase& c, const ReferenceOptions& options,
                                            std::vector<uint16_t>& bits) {
  const GroupedProblem problem = case_.weights_deferred ? OracleProblem(c) : c.Problem();
  PhaseTimer timer(counters_.seconds_in(Phase::kCpuReference));
  return ReferenceGemm(problem, options, bits);
}

namespace {

// "activations: 3 of 4096 elements changed, the first [17]: 0x0001 -> 0x0000" for each input the
// kernel changed; "" where it left them all as they were.
template <typename T>
void DescribeChange(std::string_view input, const std::vector<T>& before, const std::vector<T>& after,
                    std::string& text) {
  if (before == after) return;  // memcmp speed: this runs after every run of an exposing module
  if (before.size() != after.size()) {
    text += fmt::format("{}{}: {} elements, now {}", text.empty() ? "" : "; ", input, before.size(), after.size());
    return;
  }
  const size_t first = size_t(std::mismatch(before.begin(), before.end(), after.begin()).first - before.begin());
  size_t changed = 0;
  for (size_t i = first; i < before.size(); ++i) changed += before[i] != after[i];
  text += fmt::format("{}{}: {} of {} elements changed, the first [{}]: 0x{:x} -> 0x{:x}", text.empty() ? "" : "; ",
                      input, changed, before.size(), first, before[first], after[first]);
}

}  // namespace

absl::StatusOr<Route> GemmDifferential::RunModule(GemmModule& module, const FuzzCase& c, const Tactic& tactic,
                                                  std::span<uint16_t> output) {
  PhaseTimer timer(counters_.seconds_in(Phase::kKernels));
  if (!module.ExposesHostInputs()) return module.Run(c, tactic, output);
  // Never the case's own buffers: the reference, the later modules and the next case's
  // materialization (MaterializationMemo) read them. The copy is made again only after a run
  // changed it; comparing it with the case after each run names what changed.
  if (kernel_inputs_of_ != &c) {
    kernel_inputs_ = c;  // the vectors keep their capacity across cases
    kernel_inputs_of_ = &c;
  }
  absl::StatusOr<Route> route = module.Run(kernel_inputs_, tactic, output);
  std::string changed;
  DescribeChange("row_offsets", c.row_offsets, kernel_inputs_.row_offsets, changed);
  DescribeChange("activations", c.activations, kernel_inputs_.activations, changed);
  DescribeChange("packed_codes", c.packed_codes, kernel_inputs_.packed_codes, changed);
  DescribeChange("scale_bytes", c.scale_bytes, kernel_inputs_.scale_bytes, changed);
  if (!changed.empty()) {
    kernel_inputs_of_ = nullptr;
    if (inputs_changed_.empty()) inputs_changed_ = std::move(changed);
  }
  return route;
}

CheckResult GemmDifferential::CheckInputs(const ModuleRun& run) {
  if (inputs_changed_.empty()) return std::nullopt;
  CheckResult finding = Finding{fmt::format("abi/{}/inputs-modified", run.module),
                                fmt::format("{} wrote into its inputs, which it may only read (fuzz/modules/"
                                            "mxdiff_kernel_abi.h): {}. It ran on a private copy: the reference and "
                                            "the other checks saw the case as it is",
                                            run.module, inputs_changed_)};
  inputs_changed_.clear();
  return finding;
}

CheckResult GemmDifferential::CheckHealth(GemmModule& module, const ModuleRun& run) {
  absl::Status status;
  {
    PhaseTimer timer(counters_.seconds_in(Phase::kKernels));  // a device-wide wait
    status = module.CheckHealth();
  }
  if (status.ok()) return std::nullopt;
  return Finding{fmt::format("cuda-error/{}", run.module),
                 fmt::format("{} left the device unhealthy after tactic {}: {}", run.module, TacticName(run.tactic),
                             status.ToString())};
}

CheckResult GemmDifferential::CheckRoute(const FuzzCase& c, const ModuleRun& run, const LayerAdmission& admission) {
  const std::string& name = run.module;
  if (!run.route.ok() || !run.expected.ok()) {
    if (!run.route.ok() && !run.expected.ok() && run.route.status().code() == run.expected.status().code()) {
      const bool untouched = std::all_of(run.output.begin(), run.output.end(),
                                         [](uint16_t bits) { return bits == kOutputPoison; });
      if (!untouched) {
        return Finding{fmt::format("route/{}/output-written-on-error", name),
                       fmt::format("{} failed ({}) but wrote the output", name,
                                   run.route.status().ToString(absl::StatusToStringMode::kWithNoExtraData))};
      }
      CountRouteError(c.request, c.policy, run.route.status().code());
      return std::nullopt;
    }
    // An external kernel's failure that names its kind ("python/bound: ...") is told apart by it.
    const std::string kind = run.route.ok() ? std::string() : FailureKindOf(run.route.status());
    return Finding{fmt::format("route/{}/{}{}{}", name, run.route.ok() ? "ran-where-it-must-fail" : "unexpected-error",
                               kind.empty() ? "" : "/", kind),
                   fmt::format("{} with tactic {}: got {}, expected {}", name, TacticName(run.tactic),
                               RouteOrError(run.route), RouteOrError(run.expected))};
  }
  CountRoute(*run.route);
  if (run.route->variant == Transform::kFolded && !admission.admitted) {
    return Finding{"route/folded-on-refused",
                   fmt::format("{} ran folded on a refused layer: {}", name, admission.Describe())};
  }
  if (*run.route != *run.expected) {
    return Finding{fmt::format("route/{}/{}-instead-of-{}", name, RouteReasonName(run.route->reason),
                               RouteReasonName(run.expected->reason)),
                   fmt::format("{} reported route {}, the dispatch rules demand {}", name, DescribeRoute(*run.route),
                               DescribeRoute(*run.expected))};
  }
  return std::nullopt;
}

CheckResult GemmDifferential::CheckWritten(const FuzzCase& c, const ModuleRun& run) {
  const Route& route = *run.route;
  const size_t unwritten = FirstUnwritten(run.output);
  if (unwritten == run.output.size()) return std::nullopt;
  return Finding{fmt::format("no-launch/{}/{}", run.module, TacticSignature(c, route.tactic)),
                 fmt::format("{} returned route {} but left element {} (of {}) unwritten", run.module,
                             DescribeRoute(route), unwritten, run.output.size())};
}

// Every written element against the reference of the route that ran (unwritten ones are `written`'s).
CheckResult GemmDifferential::CheckBits(const FuzzCase& c, ModuleRun& run, CaseEvaluation& evaluation) {
  const Route& route = *run.route;
  absl::StatusOr<ReferenceBits*> reference = Reference(c, route.variant, run.model, route.tactic, evaluation);
  if (reference.ok() && (*reference)->unconfirmed && (*reference)->bits != run.output) {
    // A kernel is never judged on the device oracle's word alone: the CPU reference first.
    if (absl::Status status = ConfirmOnCpu(c, **reference, evaluation); !status.ok()) reference = status;
  }
  if (!reference.ok()) {
    return Finding{"reference/rejected-valid-case", fmt::format("ReferenceGemm: {}", reference.status().ToString())};
  }
  run.reference = (*reference)->bits;
  counters_.elements_compared += run.output.size();
  if (const size_t i = FirstWrittenMismatch(run.output, run.reference); i < run.output.size()) {
    const int row = int(i / size_t(c.n)), column = int(i % size_t(c.n));
    const std::string& name = run.module;
    return Finding{fmt::format("mismatch/{}{}/{}/{}", name == TransformName(route.variant) ? "" : name + "/",
                               TransformName(route.variant), TacticSignature(c, route.tactic),
                               ScaleClassOfColumn(c, HostScales(c), row, column)),
                   fmt::format("{}: element [{}][{}] is 0x{:04x} ({}), the reference ({} {}) says 0x{:04x} ({}), "
                               "{}; route {}",
                               name, row, column, run.output[i], f16_to_f32(run.output[i]),
                               TransformName(route.variant), StepModelName(run.model), run.reference[i],
                               f16_to_f32(run.reference[i]), F16DistanceText(run.output[i], run.reference[i]),
                               DescribeRoute(route))};
  }
  return std::nullopt;
}

// The case again in another tile order where the module has one, else the same launch again.
CheckResult GemmDifferential::CheckDeterminism(const FuzzCase& c, GemmModule& module, const ModuleRun& run) {
  const Route& route = *run.route;
  const size_t elements = run.output.size();
  const Tactic again_tactic = module.ReorderedTactic(run.tactic).value_or(run.tactic);
  std::vector<uint16_t> second(elements, kOutputPoison);
  absl::StatusOr<Route> again = RunModule(module, c, again_tactic, second);
  if (again.ok() && SameRouteButSwizzle(*again, route) && second == run.output) return std::nullopt;
  size_t first_difference = 0;
  while (first_difference < elements && second[first_difference] == run.output[first_difference]) {
    ++first_difference;
  }
  return Finding{fmt::format("nondeterminism/{}/{}", run.module, TacticSignature(c, route.tactic)),
                 fmt::format("{}: the case again with tactic {} gave {}", run.module, TacticName(again_tactic),
                             !again.ok()                           ? again.status().ToString()
                             : !SameRouteButSwizzle(*again, route) ? "route " + DescribeRoute(*again)
                                                                   : fmt::format("element {}: 0x{:04x}, first run "
                                                                                 "0x{:04x}",
                                                                                 first_difference,
                                                                                 second[first_difference],
                                                                                 run.output[first_difference]))};
}

// Runs the module once and every check that has something to look at; every verdict is kept.
void GemmDifferential::EvaluateModule(const FuzzCase& c, GemmModule& module, const LayerAdmission& admission,
                                      CaseEvaluation& evaluation) {
  ModuleRun& run = evaluation.runs.emplace_back();
  run.module = module.name();
  run.tactic = module.MapTactic(c);
  run.model = module.model().value_or(c.model);
  run.expected = module.ExpectedRoute(c, run.tactic, admission);
  run.output.assign(size_t(c.rows()) * size_t(c.n), kOutputPoison);
  const FuzzCase& input = module.TakesRecipeWeights() ? c : HostCase(c);  // its weights where it needs them
  inputs_changed_.clear();
  run.route = RunModule(module, input, run.tactic, run.output);
  auto verdict = [&](size_t check, CheckResult finding) {
    evaluation.verdicts.push_back({kCheckNames[check], run.module, std::move(finding)});
  };
  verdict(kHealthCheck, CheckHealth(module, run));
  // Whatever the run returned (a kernel may write its inputs and then decline the case).
  const bool inputs_kept = !module.ExposesHostInputs() || inputs_changed_.empty();
  if (module.ExposesHostInputs()) verdict(kInputsCheck, CheckInputs(run));
  const absl::StatusCode code = run.route.status().code();
  if (code == absl::StatusCode::kUnimplemented) {
    run.unsupported = true;
    ++runs_unsupported_;
    return;
  }
  // Out of device memory for this case: a refused case, never a kernel finding.
  if (code == absl::StatusCode::kResourceExhausted && run.expected.status().code() != code) {
    run.unsupported = true;
    ++counters_.runs_refused;
    return;
  }
  verdict(kRouteCheck, CheckRoute(c, run, admission));
  if (!run.route.ok()) return;  // no route ran: nothing was written to compare
  verdict(kWrittenCheck, CheckWritten(c, run));
  CheckResult bits = CheckBits(c, run, evaluation);  // may record device-vs-cpu verdicts first
  verdict(kBitsCheck, std::move(bits));
  verdict(kDeterminismCheck, CheckDeterminism(input, module, run));
  if (CheckResult rerun = CheckInputs(run); rerun && inputs_kept) verdict(kInputsCheck, std::move(rerun));
  verdict(kHealthCheck, CheckHealth(module, run));
}

CaseEvaluation GemmDifferential::Evaluate(const FuzzCase& c) {
  case_ = CaseOracle{};
  compact_.ready = false;
  kernel_inputs_of_ = nullptr;  // the same case object may hold another case now
  case_.weights_deferred = (c.packed_codes.empty() && c.recipe(TensorKind::kCodes).has_value() &&
                            c.element_count(TensorKind::kCodes) > 0) ||
                           (c.scale_bytes.empty() && c.recipe(TensorKind::kScales).has_value() &&
                            c.element_count(TensorKind::kScales) > 0);
  case_.large = device_oracle_ != nullptr && settings_.cpu_check_every > 0 && AboveDeviceWork(c, settings_);
  case_.sampled = case_.large && CpuCheckSampled(c, settings_.cpu_check_every);
  case_.device_way = case_.large && GoesDeviceWay(c, settings_, device_oracle_.get());
  CaseEvaluation evaluation = EvaluateAll(c);
  ++counters_.cases;
  ++counters_.cases_by_shape[size_t(ShapeClassOf(c))];
  if (case_.on_device) {
    ++counters_.cases_device;
    counters_.cases_cpu_checked += case_.cpu_checked;
    counters_.cases_device_materialized += case_.device_materialized;
  } else if (case_.on_cpu) {
    ++counters_.cases_cpu;
  }
  counters_.host_weights_skipped += case_.weights_deferred;
  counters_.host_weights_late += case_.weights_late;
  counters_.device_fallbacks += case_.fell_back;
  counters_.device_refused += case_.refused;
  return evaluation;
}

CaseEvaluation GemmDifferential::EvaluateAll(const FuzzCase& c) {
  reference_cache_.clear();
  CaseEvaluation evaluation;
  const LayerAdmission& admission = Admission(c, evaluation);
  layer_admitted_ = admission.admitted;
  for (const std::unique_ptr<GemmModule>& module : modules_) EvaluateModule(c, *module, admission, evaluation);
  bool any_ran = false;
  const std::vector<uint16_t>* ordinary_bits = nullptr;
  const std::vector<uint16_t>* folded_bits = nullptr;
  for (size_t i = 0; i < evaluation.runs.size(); ++i) {  // one run per module, in order
    const ModuleRun& run = evaluation.runs[i];
    if (run.unsupported || !run.route.ok()) continue;
    any_ran = true;
    if (modules_[i]->model().has_value()) {
      (run.route->variant == Transform::kFolded ? folded_bits : ordinary_bits) = &run.output;
    }
  }
  // The claim the seed project made, checked directly (the bits check implies it).
  const bool differ = ordinary_bits != nullptr && folded_bits != nullptr && *ordinary_bits != *folded_bits;
  evaluation.verdicts.push_back(
      {kCheckNames[kCrossModuleCheck], "",
       differ ? CheckResult(Finding{"mismatch/ordinary-vs-folded",
                                    "ordinary and folded kernels differ on an admitted layer"})
              : std::nullopt});
  if (any_ran) ++cases_compared_;
  const double work = double(c.rows()) * double(c.n) * double(c.k);
  // The CPU reference's own determinism: on the small cases it judges, and on every case where no
  // module is loaded (the CPU side is then all there is). A large case that the loaded modules
  // all refused needs no reference: four CPU references of an `exact` 2^25-product case take
  // seconds (72% of an H200 campaign's worker time, 5 Dec).
  if (modules_.empty() || (work <= kCpuSideWork && !case_.large)) {
    CheckResult finding = CheckCpuSide(c, evaluation);
    evaluation.verdicts.push_back({kCheckNames[kCpuSideCheck], "", std::move(finding)});
  }
  return evaluation;
}

const LayerAdmission& GemmDifferential::Admission(const FuzzCase& c, CaseEvaluation& evaluation) {
  PhaseTimer timer(counters_.seconds_in(Phase::kAdmission));
  // A recipe (its overrides included) and the tensor's size decide every scale byte; most
  // mutations keep them.
  const std::optional<TensorRecipe>& recipe = c.recipe(TensorKind::kScales);
  const size_t scale_count = c.element_count(TensorKind::kScales);
  if (!recipe || admission_memo_.recipe != recipe || admission_memo_.scale_count != scale_count) {
    absl::StatusOr<LayerAdmission> on_device = absl::UnavailableError("not the device way");
    if (case_.device_way) {
      on_device = device_oracle_->AdmitCase(c);
      if (!on_device.ok()) NoteDeviceFallback(on_device.status());  // admitted on the host instead
    }
    admission_memo_.admission = on_device.ok() ? *std::move(on_device) : AdmitLayer(HostScales(c));
    admission_memo_.recipe = recipe;
    admission_memo_.scale_count = scale_count;
  }
  if (case_.device_way && case_.sampled) {  // the device's verdict is trusted as far as the host's agrees
    const LayerAdmission on_host = AdmitLayer(HostScales(c));
    CheckResult finding;
    if (!(on_host == admission_memo_.admission)) {
      ++counters_.oracle_disagreements;
      finding = Finding{"oracle/device-vs-cpu/admission",
                        fmt::format("the {} admits the layer as \"{}\" ({} refused), the host as \"{}\" ({} refused)",
                                    device_oracle_->name(), admission_memo_.admission.Describe(),
                                    admission_memo_.admission.refused_count, on_host.Describe(),
                                    on_host.refused_count)};
      admission_memo_.admission = on_host;  // the kernels' routes are judged on the host's verdict
    }
    evaluation.verdicts.push_back({kCheckNames[kDeviceVsCpuCheck], device_oracle_->name(), std::move(finding)});
  }
  return admission_memo_.admission;
}

const FuzzCase& GemmDifferential::HostCase(const FuzzCase& c) {
  if (!case_.weights_deferred) return c;
  if (!case_.host_case_ready) {
    PhaseTimer timer(counters_.seconds_in(Phase::kDecode));
    case_.weights_late = true;
    const std::span<const uint8_t> scales = HostScales(c);  // the sample's, where it came first
    host_case_ = c;
    host_case_.scale_bytes.assign(scales.begin(), scales.end());
    if (host_case_.packed_codes.empty() && c.recipe(TensorKind::kCodes)) {
      host_case_.packed_codes.resize(c.element_count(TensorKind::kCodes) / 2);
      MaterializeCodes(*c.recipe(TensorKind::kCodes), host_case_.packed_codes);
    }
    case_.host_case_ready = true;
  }
  return host_case_;
}

std::span<const uint8_t> GemmDifferential::HostScales(const FuzzCase& c) {
  if (!c.scale_bytes.empty() || !c.recipe(TensorKind::kScales)) return c.scale_bytes;
  if (!case_.scales_late) {
    PhaseTimer timer(counters_.seconds_in(Phase::kDecode));
    case_.scales_late = case_.weights_late = true;
    host_scales_.resize(c.element_count(TensorKind::kScales));
    MaterializeScales(*c.recipe(TensorKind::kScales), host_scales_);
  }
  return host_scales_;
}

bool GemmDifferential::NeedsHostWeights(const FuzzCase& c) const {
  if (!GoesDeviceWay(c, settings_, device_oracle_.get())) return true;
  return !std::all_of(modules_.begin(), modules_.end(),
                      [](const std::unique_ptr<GemmModule>& module) { return module->TakesRecipeWeights(); });
}

absl::StatusOr<bool> DecodeForDifferential(std::span<const uint8_t> input, const GemmDifferential& differential,
                                           FuzzCase& c, FuzzCase& description, MaterializationMemo* memo) {
  if (absl::Status status = DecodeCaseInto(input, description, Materialize::kNo); !status.ok()) return status;
  if (differential.NeedsHostWeights(description)) {
    if (absl::Status status = DecodeCaseInto(input, c, Materialize::kYes, memo); !status.ok()) return status;
    return false;
  }
  if (absl::Status status = DecodeCaseInto(input, c, Materialize::kAllButWeights, memo); !status.ok()) return status;
  return true;
}

void GemmDifferential::ForgetState() {
  reference_cache_.clear();
  admission_memo_ = {};
  for (const std::unique_ptr<GemmModule>& module : modules_) module->ForgetState();
}

CheckResult GemmDifferential::CheckCase(const FuzzCase& c) {
  const CaseEvaluation evaluation = Evaluate(c);
  const CheckVerdict* first = evaluation.FirstFinding();
  return first != nullptr ? first->finding : std::nullopt;
}

}  // namespace mxdiff::fuzz
