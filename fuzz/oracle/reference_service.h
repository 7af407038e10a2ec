// Which reference judges a fuzz_gemm case, against which plan: the CPU reference for cases up to
// OracleSettings::device_above_work multiply-adds; above it the device oracle (fuzz/modules/
// reference_oracle.h) where there is one, and then also the CPU for 1 in cpu_check_every of them
// (chosen by a hash of the input, so a replay chooses the same). A kernel is never judged on
// device bits the CPU has not confirmed: where it disagrees with them, the CPU reference is
// computed first, and a wrong device oracle is a finding of its own (`device-vs-cpu`). The
// reference is computed once per (transform, model, split partition) within a case, for the plan
// the caller names: the plan of the route a module ran (its tactic), or the plan a module
// reported it ran (an external kernel of C ABI version 2: PlanOfReport). Owned by the target's
// state with the case's weights (case_weights.h) and the counters (fuzz/driver/gemm_counters.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/gemm_counters.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/modules/gemm_module.h"
#include "fuzz/modules/reference_oracle.h"
#include "fuzz/oracle/case_weights.h"
#include "reference/admission.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {

// The named check under which the device oracle's own verdicts are kept.
inline constexpr std::string_view kDeviceVsCpuCheckName = "device-vs-cpu";

// One named check's verdict on a case (fuzz/checks/gemm_differential.h's kCheckNames).
struct CheckVerdict {
  std::string_view check;  // one of kCheckNames
  std::string module;      // empty for cpu-side and cross-module
  CheckResult finding;     // nullopt: passed
};

// Which oracle computes a case's reference.
struct OracleSettings {
  // Cases of more multiply-adds (rows x N x K), or of more weights (groups x N x K, which the host
  // would materialize), than this go to the device oracle, where there is one.
  double device_above_work = double(1 << 22);
  // 1 in this many of those (by the input's hash) is also computed on the CPU and compared (1: all).
  int cpu_check_every = 16;
};

// Whether the case has more multiply-adds, or rows and more weights, than settings.device_above_work.
bool AboveDeviceWork(const FuzzCase& fuzz_case, const OracleSettings& settings);
// The case's shape class (gemm_counters.h): decode (a real decode shape of reference/decode_shapes.h:
// W13/W2 at PP2xTP4 or TP8, 1 to 6 experts with rows, 1..8 rows each, up to 256 experts in all,
// whatever its work), small (not above OracleSettings' default work), huge (every other case).
ShapeClass ShapeClassOf(const FuzzCase& fuzz_case);
// Whether the input is one of the 1 in `every` whose device bits are checked on the CPU: a
// function of the input's bytes alone (every <= 1: all).
bool CpuCheckSampled(std::span<const uint8_t> input, int every);
// The same for a case without its input (a known case, a test): the hash of its encoding, which is
// the input's bytes for every input the encoder wrote.
bool CpuCheckSampled(const FuzzCase& fuzz_case, int every);
// The device way: a case the device oracle judges (more than settings.device_above_work
// multiply-adds, cpu_check_every > 0) whose weights come from recipes, with an oracle that takes
// them where the device materialized them (ReferenceOracle::TakesDeviceWeights; CaseWeights::
// OnDevice): its reference is computed on those, not on the host's copy. Counted as `device_materialized`.
bool GoesDeviceWay(const FuzzCase& fuzz_case, const OracleSettings& settings, const ReferenceOracle* oracle);

// The reduction a reference follows: what decides its bits.
struct ReferencePlan {
  Transform transform = Transform::kOrdinary;
  StepModel model = StepModel::kSm90Emulated;
  int cta_k = 0;
  int splits = 1;  // as requested; the split partition is effective_splits'
};
// The plan of a route that ran `tactic` (what the checks judge a module by, unless it reports
// another: PlanOfReport).
ReferencePlan PlanOfTactic(Transform transform, StepModel model, const Tactic& tactic);
// The plan a module reported it ran (GemmModule::ReportedPlan) on a case of `k`, or
// InvalidArgument saying why the reference cannot model it: a cta_k or split count ValidateTactic
// refuses, more splits than lcm(32, cta_k) chunks in k (reference/split_plan.h never makes an
// empty split), a kernel label that is not file-name safe (it names the campaign's counts).
absl::StatusOr<ReferencePlan> PlanOfReport(Transform transform, StepModel model, const RanPlan& plan, int k);

class ReferenceService {
 public:
  // `device_oracle`: the second oracle for large cases (null: the CPU reference for every case).
  ReferenceService(std::unique_ptr<ReferenceOracle> device_oracle, OracleSettings settings, CaseWeights& weights,
                   DifferentialCounters& counters);
  ReferenceService(const ReferenceService&) = delete;
  ReferenceService& operator=(const ReferenceService&) = delete;

  // A new case: which oracle judges it. `input`: its bytes (empty: none, the case's encoding is
  // hashed). The case is the one `weights` (CaseWeights::Begin) holds; every call below until the
  // next Begin judges it.
  void Begin(std::span<const uint8_t> input);
  // The case's counters (cases judged on the CPU, the device, fallbacks, ...) added.
  void End();

  // The layer's fold admission: the device's on the device way (CaseWeights::OnDevice; checked
  // against the host's on a sampled case: a `device-vs-cpu` verdict), else the host's; remembered
  // while the scales' recipe stays.
  const LayerAdmission& Admission(std::vector<CheckVerdict>& verdicts);
  // The reference that judges `output`, a module's bits for `plan`: the device oracle's where the
  // case is large and they agree, else (first confirming the device's bits on the CPU, a verdict
  // in `verdicts`) the CPU's.
  absl::StatusOr<const std::vector<uint16_t>*> Judge(const ReferencePlan& plan, std::span<const uint16_t> output,
                                                     std::vector<CheckVerdict>& verdicts);
  // The CPU reference alone (the cpu-side check): multi-threaded from the cache, or `threads` = 1
  // computed apart; the transforms are never merged on an admitted layer here.
  absl::StatusOr<const std::vector<uint16_t>*> CpuReference(const ReferencePlan& plan,
                                                            std::vector<CheckVerdict>& verdicts);
  absl::Status CpuReferenceSingleThreaded(const ReferencePlan& plan, std::vector<uint16_t>& bits);

  // Whether the case (its description is enough) needs its weights on the host: every case but
  // one that goes the device way and whose modules all take recipe weights
  // (GemmModule::TakesRecipeWeights). A sampled one materializes the groups with rows later.
  bool NeedsHostWeights(const FuzzCase& fuzz_case, std::span<const std::unique_ptr<GemmModule>> modules) const;
  // Whether the case being judged is large (the device oracle's, where there is one).
  bool large() const { return case_.large; }
  // The case's shape class (ShapeClassOf).
  ShapeClass shape_class() const { return case_.shape_class; }
  // The cache and the admission dropped (a finding's confirmation runs as in a fresh process).
  void ForgetState();

  const ReferenceOracle* device_oracle() const { return device_oracle_.get(); }
  const OracleSettings& settings() const { return settings_; }
  // Why the device oracle last fell back to the CPU (empty: never).
  const std::string& last_fallback() const { return last_fallback_; }

 private:
  struct Key {
    Transform transform;
    StepModel model;
    int cta_k;
    int splits;  // effective
    auto operator<=>(const Key&) const = default;
  };
  struct Bits {
    ReferenceOptions options;
    std::vector<uint16_t> bits;
    bool unconfirmed = false;  // the device oracle's, not (yet) compared with the CPU reference
  };
  // The reference for the plan; `cpu_only`: never the device oracle's unconfirmed bits.
  absl::StatusOr<Bits*> Reference(ReferencePlan plan, std::vector<CheckVerdict>& verdicts, bool cpu_only);
  absl::Status OnDevice(Bits& entry);
  // Computes the entry on the CPU, records the device-vs-cpu verdict and keeps the CPU's bits.
  absl::Status ConfirmOnCpu(Bits& entry, std::vector<CheckVerdict>& verdicts);
  absl::Status ComputeOnCpu(const ReferenceOptions& options, std::vector<uint16_t>& bits);
  // The device oracle could not serve this case (the CPU serves it): refused where it ran out of
  // memory, else a fallback; the reason kept for the report.
  void NoteDeviceFallback(const absl::Status& status);

  std::unique_ptr<ReferenceOracle> device_oracle_;
  OracleSettings settings_;
  CaseWeights& weights_;
  DifferentialCounters& counters_;
  std::map<Key, Bits> cache_;
  bool layer_admitted_ = false;  // of the case being judged: the folded reference is the ordinary one
  struct CaseOracle {            // where the case being judged got its references
    bool large = false, sampled = false, on_device = false, on_cpu = false, cpu_checked = false;
    bool fell_back = false, refused = false;
    bool device_way = false;           // GoesDeviceWay
    bool device_materialized = false;  // the oracle ran on the device's materialization of the weights
    ShapeClass shape_class = ShapeClass::kSmall;
  } case_;
  struct AdmissionMemo {
    std::optional<TensorRecipe> recipe;  // of the scales last admitted; none: they were bytes
    size_t scale_count = 0;
    LayerAdmission admission;
  } admission_memo_;
  std::string last_fallback_;
};

// "3 ulp", "a NaN payload difference" or "NaN against a number".
std::string F16DistanceText(uint16_t a, uint16_t b);
// ulp distance between two fp16 bit patterns on the ordered number line (NaN: 65536).
int F16UlpDistance(uint16_t a, uint16_t b);

}  // namespace mxdiff::fuzz
