// fuzz_gemm's counters (what the differential compared, where a worker's time went): kept by the
// differential's parts (fuzz/oracle/, fuzz/checks/gemm_differential.h), written to the stats file
// fuzz_gemm writes (MXDIFF_STATS_FILE) and the campaign reads (tools/campaign/campaign_stats.py).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

namespace mxdiff::fuzz {

// The shape classes the campaign counts (ShapeClassOf, fuzz/oracle/reference_service.h, decides).
enum class ShapeClass { kSmall, kDecode, kHuge };
inline constexpr std::string_view kShapeClassNames[] = {"small", "decode", "huge"};

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

// The plans one module ran (the plan it reported, GemmModule::ReportedPlan, else its route's
// tactic's), so a campaign lists which it exercised: runs per "ctak<cta_k>_splits<splits>" (the
// split count that ran) and, where the module labels its kernels, runs per label. Each map keeps
// at most kMaxPlanKeys keys; further ones count under "other".
struct ModulePlans {
  std::map<std::string, size_t, std::less<>> plans;
  std::map<std::string, size_t, std::less<>> kernels;
};
inline constexpr size_t kMaxPlanKeys = 256;

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
  std::map<std::string, ModulePlans, std::less<>> plans_by_module;  // by module name (CountPlan)
};

// One run of `module` judged by the plan (cta_k, splits that ran) of kernel `kernel` ("" none).
void CountPlan(DifferentialCounters& counters, std::string_view module, int cta_k, int splits,
               std::string_view kernel);

// The counters as the stats file's lines: one "name value" line each, in a fixed order, then per
// module "module_plan_<module>_ctak<K>_splits<S> N" and "module_kernel_<module>_<label> N".
std::string CountersText(const DifferentialCounters& counters);

// Adds an input's whole time (decode and evaluation) to its shape class, with the phases' seconds
// since `phases_before` (counters.seconds when the input started).
void AddCaseSeconds(DifferentialCounters& counters, ShapeClass shape, double seconds,
                    const PhaseSeconds& phases_before);

}  // namespace mxdiff::fuzz
