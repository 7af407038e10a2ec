// fuzz_gemm's harness, shared with tools/repro: one case through every loaded module against
// the reference, as named checks, each giving its finding and signature:
//   cpu-side      the reference agrees with itself single- and multi-threaded (small cases,
//                 or every case where no module is loaded)
//   route         the reported route (or error) is what the dispatch rules demand; a failed
//                 run leaves the output untouched; folded never runs on a refused layer
//   written       every output element was written (the output arrives poisoned)
//   bits          every element equals the reference for the route that ran
//   determinism   the case again, launched in another tile order where the module has one
//                 (the raster swizzle, which never changes bits), gives the same route and bits
//   health        the device is healthy after the case (a sticky CUDA error is a finding)
//   inputs        a module that gets the case's host buffers (GemmModule::ExposesHostInputs: an
//                 external kernel) runs on a private copy of them, which must equal the case after
//                 each run: abi/MODULE/inputs-modified
//   cross-module  ordinary and folded are bit-identical where folded ran on an admitted layer
//   device-vs-cpu the device oracle's bits equal the CPU reference's (sampled large cases, and
//                 every case where a kernel disagrees with the device oracle): oracle/device-vs-cpu;
//                 a device oracle that fails with a CUDA error: oracle/device-error
// Each module runs once per case (plus the determinism rerun); the reference is computed once
// per (transform, model, split partition) within a case: on the CPU for cases up to
// OracleSettings::device_above_work multiply-adds, on the device oracle (fuzz/modules/
// reference_oracle.h) above it where there is one, and then also on the CPU for 1 in
// cpu_check_every of them (chosen by the case's hash, so a replay chooses the same). A kernel is
// never judged on device bits the CPU has not confirmed: where it disagrees with them, the CPU
// reference is computed first, and a wrong device oracle is a finding of its own.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/checks/output_scan.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"
#include "fuzz/modules/gemm_module.h"
#include "fuzz/modules/reference_oracle.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {

inline constexpr std::string_view kCheckNames[] = {"cpu-side",    "route",  "written",      "bits",         "determinism",
                                                   "health",      "inputs", "cross-module", "device-vs-cpu"};
// Each check's index in kCheckNames: the differential names its verdicts through these.
inline constexpr size_t kCpuSideCheck = 0, kRouteCheck = 1, kWrittenCheck = 2, kBitsCheck = 3, kDeterminismCheck = 4,
                        kHealthCheck = 5, kInputsCheck = 6, kCrossModuleCheck = 7, kDeviceVsCpuCheck = 8;

// Which oracle computes a case's reference.
struct OracleSettings {
  // Cases of more multiply-adds (rows x N x K), or of more weights (groups x N x K, which the host
  // would materialize), than this go to the device oracle, where there is one.
  double device_above_work = double(1 << 22);
  // 1 in this many of those (by the case's hash) is also computed on the CPU and compared (1: all).
  int cpu_check_every = 16;
};

// Whether the case has more multiply-adds, or rows and more weights, than settings.device_above_work.
bool AboveDeviceWork(const FuzzCase& fuzz_case, const OracleSettings& settings);

// The shape classes the campaign counts: decode (a real decode shape of reference/decode_shapes.h:
// W13/W2 at PP2xTP4 or TP8, 1 to 6 experts with rows, 1..8 rows each, up to 256 experts in all,
// whatever its work), small (not above OracleSettings' default work), huge (every other case).
enum class ShapeClass { kSmall, kDecode, kHuge };
inline constexpr std::string_view kShapeClassNames[] = {"small", "decode", "huge"};
ShapeClass ShapeClassOf(const FuzzCase& fuzz_case);
// Whether the case is one of the 1 in `every` whose device bits are checked on the CPU: a
// function of the case's encoding alone (every <= 1: all).
bool CpuCheckSampled(const FuzzCase& fuzz_case, int every);
// The device way: a case the device oracle judges (more than settings.device_above_work
// multiply-adds, cpu_check_every > 0) whose weights come from recipes, with an oracle that
// materializes them itself (ReferenceOracle::MaterializesRecipes): its reference is computed on
// weights materialized on the device, not on the host's copy. Counted as `device_materialized`.
bool GoesDeviceWay(const FuzzCase& fuzz_case, const OracleSettings& settings, const ReferenceOracle* oracle);

// Where a worker's time goes (wall clock, summed over cases): decoding an input and materializing
// its tensors on the host, the layer's admission, the kernel modules' runs (preparing a layer
// included), the CPU reference and the device reference. What is left of a worker's time is
// libFuzzer's and the checks' own.
enum class Phase { kDecode, kAdmission, kKernels, kCpuReference, kDeviceReference };
inline constexpr std::string_view kPhaseNames[] = {"decode", "admission", "kernels", "cpu_reference",
                                                   "device_reference"};
inline constexpr size_t kPhaseCount = std::size(kPhaseNames);
using PhaseSeconds = std::array<double, kPhaseCount>;

// Adds the seconds from its making to its end to `seconds`. A timer made inside another's scope
// (host scales materialized for the admission) stops the outer one's clock until it ends: no
// second is counted in two phases.
class PhaseTimer {
 public:
  explicit PhaseTimer(double& seconds)
      : seconds_(seconds), outer_(innermost_), start_(std::chrono::steady_clock::now()) {
    if (outer_ != nullptr) outer_->seconds_ += Seconds(outer_->start_, start_);
    innermost_ = this;
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() {
    const auto end = std::chrono::steady_clock::now();
    seconds_ += Seconds(start_, end);
    innermost_ = outer_;
    if (outer_ != nullptr) outer_->start_ = end;
  }

 private:
  static double Seconds(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  }
  static inline thread_local PhaseTimer* innermost_ = nullptr;
  double& seconds_;
  PhaseTimer* outer_;
  std::chrono::steady_clock::time_point start_;
};

// What the differential did since it was made (fuzz_gemm's stats, the campaign's report).
struct DifferentialCounters {
  size_t cases = 0;
  size_t cases_by_shape[3] = {};  // indexed by ShapeClass
  size_t elements_compared = 0;   // output elements compared with a reference (each module's bits check)
  size_t cases_cpu = 0;           // cases judged on the CPU reference alone (small, no device, fallbacks)
  size_t cases_device = 0;        // cases judged on the device oracle's bits
  size_t cases_cpu_checked = 0;   // of those, the ones whose device bits were also computed on the CPU
  size_t device_fallbacks = 0;    // cases the device oracle could not run (no device, an error): CPU instead
  size_t device_refused = 0;      // cases the device oracle refused out of memory: CPU instead
  size_t oracle_disagreements = 0;  // oracle/device-vs-cpu verdicts
  size_t runs_refused = 0;        // module runs refused out of memory (ResourceExhausted): no finding
  size_t cases_device_materialized = 0;  // of cases_device, those the oracle computed on weights it
                                         // materialized on the device from the recipes (GoesDeviceWay)
  size_t host_weights_skipped = 0;  // cases decoded without their codes and scales on the host
                                    // (NeedsHostWeights)
  size_t host_weights_late = 0;     // of those, the cases that materialized some on the host after
                                    // all: the CPU-checked sample (the groups with rows), a kernel
                                    // disagreeing with the device bits, a finding, a fallback
  PhaseSeconds seconds = {};  // by Phase
  double& seconds_in(Phase phase) { return seconds[size_t(phase)]; }
  double seconds_by_shape[3] = {};  // a whole input's wall time (decode and evaluation), by ShapeClass
  PhaseSeconds phase_seconds_by_shape[3] = {};  // the same inputs' phases, by ShapeClass
};

struct CheckVerdict {
  std::string_view check;  // one of kCheckNames
  std::string module;      // empty for cpu-side and cross-module
  CheckResult finding;     // nullopt: passed
};

// What one module did with the case (the first run; repro explains these very bits).
struct ModuleRun {
  std::string module;
  Tactic tactic;
  StepModel model = StepModel::kSm90Emulated;
  absl::StatusOr<Route> expected = absl::UnknownError("not run");
  absl::StatusOr<Route> route = absl::UnknownError("not run");
  std::vector<uint16_t> output;
  std::vector<uint16_t> reference;  // for the route that ran; empty if it did not run
  bool unsupported = false;         // the module declined the case (Unimplemented, or out of memory)
};

struct CaseEvaluation {
  std::vector<CheckVerdict> verdicts;  // in the order run; every check runs, every finding is kept
  std::vector<ModuleRun> runs;
  const CheckVerdict* FirstFinding() const;
};

class GemmDifferential {
 public:
  // `device_oracle`: the second oracle for large cases (null: the CPU reference for every case).
  explicit GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules,
                            std::unique_ptr<ReferenceOracle> device_oracle = nullptr, OracleSettings settings = {});

  // Runs every module and every named check; each verdict is kept (a check whose input is
  // missing, e.g. the bits of a run that returned an error, is not run).
  // A case whose codes and scales come from recipes may arrive without them (packed_codes and
  // scale_bytes empty): the differential then materializes them on the host only where a CPU
  // reference, a finding or a module that does not take recipe weights needs them
  // (DecodeForDifferential decides when to skip them); the device oracle admits the layer.
  CaseEvaluation Evaluate(const FuzzCase& fuzz_case);
  // Whether the case (its description is enough) needs its weights on the host: every case but
  // one that goes the device way (GoesDeviceWay) and whose modules all take recipe weights
  // (GemmModule::TakesRecipeWeights). A sampled one materializes the groups with rows later.
  bool NeedsHostWeights(const FuzzCase& fuzz_case) const;
  CheckResult CheckCase(const FuzzCase& fuzz_case);
  // Every module's state across cases dropped (GemmModule::ForgetState).
  void ForgetState();

  const std::vector<std::unique_ptr<GemmModule>>& modules() const { return modules_; }
  // Cases in which at least one module ran, and module runs skipped as unsupported.
  size_t cases_compared() const { return cases_compared_; }
  size_t runs_unsupported() const { return runs_unsupported_; }
  const DifferentialCounters& counters() const { return counters_; }
  // Decoding happens outside (DecodeForDifferential): its caller adds the time here, and an
  // input's whole time (decode and evaluation) to its case's shape class, with the phases' seconds
  // since `phases_before` (counters().seconds when the input started).
  double& decode_seconds() { return counters_.seconds_in(Phase::kDecode); }
  void AddCaseSeconds(const FuzzCase& fuzz_case, double seconds, const PhaseSeconds& phases_before) {
    const size_t shape = size_t(ShapeClassOf(fuzz_case));
    counters_.seconds_by_shape[shape] += seconds;
    for (size_t phase = 0; phase < kPhaseCount; ++phase) {
      counters_.phase_seconds_by_shape[shape][phase] += counters_.seconds[phase] - phases_before[phase];
    }
  }
  const ReferenceOracle* device_oracle() const { return device_oracle_.get(); }
  const OracleSettings& oracle_settings() const { return settings_; }
  // Why the device oracle last fell back to the CPU (empty: never).
  const std::string& last_fallback() const { return last_fallback_; }

 private:
  struct ReferenceKey {
    Transform transform;
    StepModel model;
    int cta_k;
    int splits;  // effective
    auto operator<=>(const ReferenceKey&) const = default;
  };
  struct ReferenceBits {
    ReferenceOptions options;
    std::vector<uint16_t> bits;
    bool unconfirmed = false;  // the device oracle's, not (yet) compared with the CPU reference
  };
  // The reference for the route; `cpu_only`: never the device oracle's unconfirmed bits.
  absl::StatusOr<ReferenceBits*> Reference(const FuzzCase& fuzz_case, Transform transform, StepModel model,
                                           const Tactic& tactic, CaseEvaluation& evaluation, bool cpu_only = false);
  // Computes the entry on the CPU, records the device-vs-cpu verdict and keeps the CPU's bits.
  absl::Status ConfirmOnCpu(const FuzzCase& fuzz_case, ReferenceBits& entry, CaseEvaluation& evaluation);
  CheckResult CheckCpuSide(const FuzzCase& fuzz_case, CaseEvaluation& evaluation);
  // The CPU reference (of OracleProblem where the host skipped the weights) and a module's run,
  // each timed into its phase.
  absl::Status CpuReference(const FuzzCase& fuzz_case, const ReferenceOptions& options, std::vector<uint16_t>& bits);
  // A module that exposes the host inputs (GemmModule::ExposesHostInputs) runs on kernel_inputs_,
  // and what it changed there is kept in inputs_changed_ for CheckInputs.
  absl::StatusOr<Route> RunModule(GemmModule& module, const FuzzCase& fuzz_case, const Tactic& tactic,
                                  std::span<uint16_t> output);
  // The groups with rows alone (an output element reads only its row's group, so the bits are the
  // same): what the device oracle is handed, so a 256-expert layer with 6 routed experts crosses
  // PCIe as 6 experts, not 570 MB; and what the CPU reference computes where the host skipped the
  // weights, those 6 experts' codes then materialized from the recipe (MaterializeCodeSlice).
  // Built once per case.
  GroupedProblem OracleProblem(const FuzzCase& fuzz_case);
  // The case's scale bytes on the host: its own, or (once per case) materialized from the recipe.
  std::span<const uint8_t> HostScales(const FuzzCase& fuzz_case);
  // The device oracle could not serve this case (the CPU serves it): refused where it ran out of
  // memory, else a fallback; the reason kept for the report.
  void NoteDeviceFallback(const absl::Status& status);
  CaseEvaluation EvaluateAll(const FuzzCase& fuzz_case);
  // Runs the module and its checks (below), each a function of its own.
  void EvaluateModule(const FuzzCase& fuzz_case, GemmModule& module, const LayerAdmission& admission,
                      CaseEvaluation& evaluation);
  CheckResult CheckHealth(GemmModule& module, const ModuleRun& run);
  CheckResult CheckInputs(const ModuleRun& run);
  CheckResult CheckRoute(const FuzzCase& fuzz_case, const ModuleRun& run, const LayerAdmission& admission);
  CheckResult CheckWritten(const FuzzCase& fuzz_case, const ModuleRun& run);
  CheckResult CheckBits(const FuzzCase& fuzz_case, ModuleRun& run, CaseEvaluation& evaluation);
  CheckResult CheckDeterminism(const FuzzCase& fuzz_case, GemmModule& module, const ModuleRun& run);
  // The layer's fold admission: the device oracle's on the device way (checked against the host's
  // on a sampled case), else the host's; remembered while the scales' recipe stays.
  const LayerAdmission& Admission(const FuzzCase& fuzz_case, CaseEvaluation& evaluation);
  // The case with its weights on the host: itself, or (once per case) a copy with them materialized.
  const FuzzCase& HostCase(const FuzzCase& fuzz_case);

  std::vector<std::unique_ptr<GemmModule>> modules_;
  std::map<ReferenceKey, ReferenceBits> reference_cache_;
  bool layer_admitted_ = false;  // of the case being evaluated
  std::unique_ptr<ReferenceOracle> device_oracle_;
  OracleSettings settings_;
  struct CaseOracle {  // where the case being evaluated got its references
    bool large = false, sampled = false, on_device = false, on_cpu = false, cpu_checked = false;
    bool fell_back = false, refused = false;
    bool device_way = false;           // GoesDeviceWay
    bool device_materialized = false;  // the oracle ran on its own materialization of the weights
    bool weights_deferred = false;     // handed without its codes and scales on the host
    bool weights_late = false;         // and some were materialized on the host after all
    bool host_case_ready = false;      // host_case_ holds the case with its weights
    bool scales_late = false;          // host_scales_ holds the case's scales
  } case_;
  FuzzCase host_case_;  // HostCase's copy, reused across cases
  // The private copy of the inputs a module that exposes them runs on (RunModule), reused across
  // cases; kernel_inputs_of_ is the case it equals, null once a run changed it or a case ends.
  FuzzCase kernel_inputs_;
  const FuzzCase* kernel_inputs_of_ = nullptr;
  std::string inputs_changed_;  // what the module's runs changed in kernel_inputs_ ("": nothing)
  std::vector<uint8_t> host_scales_;  // HostScales' bytes, reused across cases
  struct AdmissionMemo {
    std::optional<TensorRecipe> recipe;  // of the scales last admitted; none: they were bytes
    size_t scale_count = 0;
    LayerAdmission admission;
  } admission_memo_;
  struct CompactProblem {  // OracleProblem's storage, reused across cases
    bool ready = false;
    int groups = 0;
    std::vector<int32_t> row_offsets;
    std::vector<uint8_t> codes, scales;
  } compact_;
  DifferentialCounters counters_;
  std::string last_fallback_;
  size_t cases_compared_ = 0;
  size_t runs_unsupported_ = 0;
};

// fuzz_gemm's decoding of an input for `differential`: every tensor materialized on the host,
// except the codes and scales where NeedsHostWeights says no (they are then left empty: only the
// device materializes them). `description` is scratch (the case without its payloads); `memo` speeds up
// the full decode as in the fuzz loop (tensor payloads of `fuzz_case` are reused). Returns whether
// the weights were skipped; an input that does not decode is an error.
absl::StatusOr<bool> DecodeForDifferential(std::span<const uint8_t> input, const GemmDifferential& differential,
                                           FuzzCase& fuzz_case, FuzzCase& description, MaterializationMemo* memo);

// The counters as the stats file fuzz_gemm writes (MXDIFF_STATS_FILE) and the campaign reads
// (tools/campaign/campaign_stats.py): one "name value" line each, in a fixed order.
std::string CountersText(const DifferentialCounters& counters);

// The most unusual class (reference/scale_class.h) among the scale bytes (the case's, as
// scale_bytes) of the weight column behind an output element (the signature's last part).
std::string ScaleClassOfColumn(const FuzzCase& fuzz_case, std::span<const uint8_t> scale_bytes, int row, int column);

// ulp distance between two fp16 bit patterns on the ordered number line (NaN: 65536).
int F16UlpDistance(uint16_t a, uint16_t b);
// "3 ulp", "a NaN payload difference" or "NaN against a number".
std::string F16DistanceText(uint16_t a, uint16_t b);

}  // namespace mxdiff::fuzz
