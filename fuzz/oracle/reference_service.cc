#include "fuzz/oracle/reference_service.h"

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "reference/decode_shapes.h"
#include "reference/hash.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {

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

bool GoesDeviceWay(const FuzzCase& c, const OracleSettings& settings, const ReferenceOracle* oracle) {
  return oracle != nullptr && settings.cpu_check_every > 0 && AboveDeviceWork(c, settings) &&
         oracle->TakesDeviceWeights() && c.WeightsFromRecipes();
}

namespace {

// FNV-1a over the bytes, then a SplitMix64 finalizer.
bool SampledByHash(uint64_t hash, int every) {
  return SplitMix64::Finalize(hash) % uint64_t(every) == 0;
}

uint64_t HashBytes(uint64_t hash, const uint8_t* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) hash = Fnv1a64Mix(hash, bytes[i]);
  return hash;
}

}  // namespace

bool CpuCheckSampled(std::span<const uint8_t> input, int every) {
  if (every <= 1) return true;
  return SampledByHash(HashBytes(kFnv1a64Basis, input.data(), input.size()), every);
}

bool CpuCheckSampled(const FuzzCase& c, int every) {
  if (every <= 1) return true;
  if (absl::StatusOr<std::vector<uint8_t>> encoded = EncodeCase(c); encoded.ok()) {
    return CpuCheckSampled(*encoded, every);
  }
  // Not encodable (a payload over the format's limit): its materialized tensors.
  uint64_t hash = kFnv1a64Basis;
  hash = HashBytes(hash, reinterpret_cast<const uint8_t*>(c.activations.data()),
                   c.activations.size() * sizeof(uint16_t));
  hash = HashBytes(hash, c.packed_codes.data(), c.packed_codes.size());
  hash = HashBytes(hash, c.scale_bytes.data(), c.scale_bytes.size());
  return SampledByHash(hash, every);
}

ReferencePlan PlanOfTactic(Transform transform, StepModel model, const Tactic& tactic) {
  return ReferencePlan{transform, model, tactic.cta_k, tactic.splits};
}

absl::StatusOr<ReferencePlan> PlanOfReport(Transform transform, StepModel model, const RanPlan& plan, int k) {
  Tactic tactic;
  tactic.cta_k = plan.cta_k;
  tactic.splits = plan.splits;
  std::string why;
  if (absl::Status valid = ValidateTactic(tactic); !valid.ok()) {
    why = std::string(valid.message());
  } else if (const int chunks = split_chunk_count(k, plan.cta_k); plan.splits > chunks) {
    why = fmt::format("{} splits, but k {} has only {} chunk(s) of {}: a split would be empty", plan.splits, k, chunks,
                      split_chunk_k(plan.cta_k));
  } else if (plan.kernel.size() >= sizeof(mxdiff_plan::kernel) || !FileNameSafe(plan.kernel)) {
    why = fmt::format("the kernel label \"{}\" is not a NUL-terminated [A-Za-z0-9._-] string of at most {} bytes",
                      absl::CHexEscape(plan.kernel), sizeof(mxdiff_plan::kernel) - 1);
  }
  if (!why.empty()) {
    return absl::InvalidArgumentError(fmt::format("a plan the reference cannot model (cta_k {}, splits {}): {}",
                                                  plan.cta_k, plan.splits, why));
  }
  return ReferencePlan{transform, model, plan.cta_k, plan.splits};
}

ReferenceService::ReferenceService(std::unique_ptr<ReferenceOracle> device_oracle, OracleSettings settings,
                                   CaseWeights& weights, DifferentialCounters& counters)
    : device_oracle_(std::move(device_oracle)), settings_(settings), weights_(weights), counters_(counters) {}

void ReferenceService::Begin(std::span<const uint8_t> input) {
  const FuzzCase& c = weights_.fuzz_case();
  case_ = CaseOracle{};
  case_.shape_class = ShapeClassOf(c);
  cache_.clear();
  layer_admitted_ = false;
  case_.large = device_oracle_ != nullptr && settings_.cpu_check_every > 0 && AboveDeviceWork(c, settings_);
  case_.sampled = case_.large && (input.empty() ? CpuCheckSampled(c, settings_.cpu_check_every)
                                                : CpuCheckSampled(input, settings_.cpu_check_every));
  case_.device_way = case_.large && GoesDeviceWay(c, settings_, device_oracle_.get());
}

void ReferenceService::End() {
  if (case_.on_device) {
    ++counters_.cases_device;
    counters_.cases_cpu_checked += case_.cpu_checked;
    counters_.cases_device_materialized += case_.device_materialized;
  } else if (case_.on_cpu) {
    ++counters_.cases_cpu;
  }
  counters_.device_fallbacks += case_.fell_back;
  counters_.device_refused += case_.refused;
}

bool ReferenceService::NeedsHostWeights(const FuzzCase& c, std::span<const std::unique_ptr<GemmModule>> modules) const {
  if (!GoesDeviceWay(c, settings_, device_oracle_.get())) return true;
  return !std::all_of(modules.begin(), modules.end(),
                      [](const std::unique_ptr<GemmModule>& module) { return module->TakesRecipeWeights(); });
}

void ReferenceService::ForgetState() {
  cache_.clear();
  admission_memo_ = {};
}

const LayerAdmission& ReferenceService::Admission(std::vector<CheckVerdict>& verdicts) {
  PhaseTimer timer(counters_.seconds_in(Phase::kAdmission));
  const FuzzCase& c = weights_.fuzz_case();
  // A recipe (its overrides included) and the tensor's size decide every scale byte; most
  // mutations keep them.
  const std::optional<TensorRecipe>& recipe = c.recipe(TensorKind::kScales);
  const size_t scale_count = c.element_count(TensorKind::kScales);
  if (!recipe || admission_memo_.recipe != recipe || admission_memo_.scale_count != scale_count) {
    absl::StatusOr<const DeviceCaseWeights*> on_device = absl::UnavailableError("not the device way");
    if (case_.device_way) {
      on_device = weights_.OnDevice();
      if (!on_device.ok()) NoteDeviceFallback(on_device.status());  // admitted on the host instead
    }
    admission_memo_.admission = on_device.ok() ? (*on_device)->admission : AdmitLayer(weights_.HostScales());
    admission_memo_.recipe = recipe;
    admission_memo_.scale_count = scale_count;
  }
  if (case_.device_way && case_.sampled) {  // the device's verdict is trusted as far as the host's agrees
    const LayerAdmission on_host = AdmitLayer(weights_.HostScales());
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
    verdicts.push_back({kDeviceVsCpuCheckName, device_oracle_->name(), std::move(finding)});
  }
  layer_admitted_ = admission_memo_.admission.admitted;
  return admission_memo_.admission;
}

absl::StatusOr<const std::vector<uint16_t>*> ReferenceService::Judge(const ReferencePlan& plan,
                                                                     std::span<const uint16_t> output,
                                                                     std::vector<CheckVerdict>& verdicts) {
  absl::StatusOr<Bits*> reference = Reference(plan, verdicts, /*cpu_only=*/false);
  if (!reference.ok()) return reference.status();
  Bits& entry = **reference;
  if (entry.unconfirmed && !std::equal(entry.bits.begin(), entry.bits.end(), output.begin(), output.end())) {
    // A kernel is never judged on the device oracle's word alone: the CPU reference first.
    if (absl::Status status = ConfirmOnCpu(entry, verdicts); !status.ok()) return status;
  }
  return &entry.bits;
}

absl::StatusOr<const std::vector<uint16_t>*> ReferenceService::CpuReference(const ReferencePlan& plan,
                                                                            std::vector<CheckVerdict>& verdicts) {
  layer_admitted_ = false;  // both transforms computed apart
  absl::StatusOr<Bits*> reference = Reference(plan, verdicts, /*cpu_only=*/true);
  if (!reference.ok()) return reference.status();
  return &(*reference)->bits;
}

absl::Status ReferenceService::CpuReferenceSingleThreaded(const ReferencePlan& plan, std::vector<uint16_t>& bits) {
  ReferenceOptions options;
  options.transform = plan.transform;
  options.model = plan.model;
  options.tactic.cta_k = plan.cta_k;
  options.tactic.splits = plan.splits;
  options.threads = 1;
  return ComputeOnCpu(options, bits);
}

absl::StatusOr<ReferenceService::Bits*> ReferenceService::Reference(ReferencePlan plan,
                                                                    std::vector<CheckVerdict>& verdicts,
                                                                    bool cpu_only) {
  const FuzzCase& c = weights_.fuzz_case();
  // On an admitted layer both transforms dequantize every weight to the same bits (that is
  // what admission means), so the folded reference is the ordinary one: computed once.
  if (plan.transform == Transform::kFolded && layer_admitted_) plan.transform = Transform::kOrdinary;
  const Key key{plan.transform, plan.model, plan.cta_k, effective_splits(c.k, plan.cta_k, plan.splits)};
  auto found = cache_.find(key);
  if (found != cache_.end()) {
    if (cpu_only && found->second.unconfirmed) {
      if (absl::Status status = ConfirmOnCpu(found->second, verdicts); !status.ok()) return status;
    }
    return &found->second;
  }
  Bits entry;
  entry.options.transform = plan.transform;
  entry.options.model = plan.model;
  entry.options.tactic.cta_k = plan.cta_k;
  entry.options.tactic.splits = plan.splits;
  if (case_.large && !cpu_only) {
    absl::Status status = OnDevice(entry);
    if (status.ok()) {
      Bits& stored = cache_.emplace(key, std::move(entry)).first->second;
      if (case_.sampled) {
        if (absl::Status confirmed = ConfirmOnCpu(stored, verdicts); !confirmed.ok()) return confirmed;
      }
      return &stored;
    }
    // Never a skipped check: the case goes to the CPU reference. No device or no memory is no
    // finding; any other CUDA error is the oracle's own (a sticky one must not be blamed on a kernel).
    NoteDeviceFallback(status);
    entry.bits.clear();
    if (status.code() == absl::StatusCode::kInternal) {
      verdicts.push_back({kDeviceVsCpuCheckName, device_oracle_->name(),
                          Finding{"oracle/device-error",
                                  fmt::format("the {} failed: {}", device_oracle_->name(), status.ToString())}});
    }
  }
  case_.on_cpu = true;
  if (absl::Status status = ComputeOnCpu(entry.options, entry.bits); !status.ok()) return status;
  return &cache_.emplace(key, std::move(entry)).first->second;
}

// The device way: the device's materialization of the recipes (same bits, no weights copied);
// else the host's tensors of the groups with rows.
absl::Status ReferenceService::OnDevice(Bits& entry) {
  absl::Status status;
  if (case_.device_way) {
    absl::StatusOr<const DeviceCaseWeights*> on_device = weights_.OnDevice();
    if (!on_device.ok()) return on_device.status();
    PhaseTimer timer(counters_.seconds_in(Phase::kDeviceReference));
    status = device_oracle_->GemmOnDeviceWeights(weights_.fuzz_case().Problem(), **on_device, entry.options,
                                                 entry.bits);
  } else {
    const GroupedProblem problem = weights_.RowGroupsProblem();
    PhaseTimer timer(counters_.seconds_in(Phase::kDeviceReference));
    status = device_oracle_->Gemm(problem, entry.options, entry.bits);
  }
  if (!status.ok()) return status;
  case_.on_device = true;
  case_.device_materialized |= case_.device_way;
  entry.unconfirmed = true;
  return absl::OkStatus();
}

void ReferenceService::NoteDeviceFallback(const absl::Status& status) {
  (status.code() == absl::StatusCode::kResourceExhausted ? case_.refused : case_.fell_back) = true;
  last_fallback_ = status.ToString();
}

absl::Status ReferenceService::ComputeOnCpu(const ReferenceOptions& options, std::vector<uint16_t>& bits) {
  const GroupedProblem problem = weights_.CpuProblem();
  PhaseTimer timer(counters_.seconds_in(Phase::kCpuReference));
  return ReferenceGemm(problem, options, bits);
}

absl::Status ReferenceService::ConfirmOnCpu(Bits& entry, std::vector<CheckVerdict>& verdicts) {
  const FuzzCase& c = weights_.fuzz_case();
  std::vector<uint16_t> cpu;
  if (absl::Status status = ComputeOnCpu(entry.options, cpu); !status.ok()) return status;
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
  verdicts.push_back({kDeviceVsCpuCheckName, device_oracle_->name(), std::move(finding)});
  entry.bits = std::move(cpu);  // the kernels are judged on the CPU's bits
  return absl::OkStatus();
}

}  // namespace mxdiff::fuzz
