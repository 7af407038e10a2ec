#include "fuzz/driver/gemm_counters.h"

#include "fmt/format.h"

namespace mxdiff::fuzz {

namespace {

void CountKey(std::map<std::string, size_t, std::less<>>& counts, std::string_view key) {
  auto found = counts.find(key);
  if (found == counts.end()) found = counts.emplace(counts.size() < kMaxPlanKeys ? key : "other", 0).first;
  ++found->second;
}

}  // namespace

void CountPlan(DifferentialCounters& counters, std::string_view module, int cta_k, int splits,
               std::string_view kernel) {
  auto found = counters.plans_by_module.find(module);
  if (found == counters.plans_by_module.end()) found = counters.plans_by_module.emplace(module, ModulePlans{}).first;
  CountKey(found->second.plans, fmt::format("ctak{}_splits{}", cta_k, splits));
  if (!kernel.empty()) CountKey(found->second.kernels, kernel);
}

std::string CountersText(const DifferentialCounters& n) {
  std::string plans;
  for (const auto& [module, ran] : n.plans_by_module) {
    for (const auto& [plan, runs] : ran.plans) plans += fmt::format("module_plan_{}_{} {}\n", module, plan, runs);
    for (const auto& [kernel, runs] : ran.kernels) {
      plans += fmt::format("module_kernel_{}_{} {}\n", module, kernel, runs);
    }
  }
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
         seconds + plans;
}

void AddCaseSeconds(DifferentialCounters& counters, ShapeClass shape, double seconds,
                    const PhaseSeconds& phases_before) {
  counters.seconds_by_shape[size_t(shape)] += seconds;
  for (size_t phase = 0; phase < kPhaseCount; ++phase) {
    counters.phase_seconds_by_shape[size_t(shape)][phase] += counters.seconds[phase] - phases_before[phase];
  }
}

}  // namespace mxdiff::fuzz
