// The interface every kernel under test implements for fuzz_gemm (CryptoFuzz's module idea):
// the builtin ordinary and folded kernels are two modules, an external shared library a third.
// A module only runs the case; the differential harness (fuzz/checks/gemm_differential.h) owns the
// poisoning, the reference, the comparisons and the signatures.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "kernels/route.h"
#include "reference/admission.h"
#include "reference/step_model.h"

namespace mxdiff::fuzz {

// The split-K plan a module reports it ran, where it may run another than its tactic's (an
// external kernel of C ABI version 2, mxdiff_kernel_abi.h): what decides the bits besides the
// transform and the step model, and which of its kernels ran (a label, "" none).
struct RanPlan {
  int cta_k = 0;
  int splits = 1;  // that ran, after any clamp
  std::string kernel;
  friend bool operator==(const RanPlan&, const RanPlan&) = default;
};

// What a module did with one case (GemmModule::RunCase); the harness's checks judge it.
struct CaseRun {
  Tactic tactic;
  absl::StatusOr<Route> expected = absl::UnknownError("not run");
  absl::StatusOr<Route> route = absl::UnknownError("not run");
  // The plan the module reported it ran, as it read it (unchecked: the harness asks the oracle
  // whether it can model it); nullopt where the route's tactic ran (every builtin module, a version
  // 1 library, a run that gave no route).
  std::optional<RanPlan> ran_plan;
  // The determinism rerun, made only where `route` holds a route.
  Tactic again_tactic;
  absl::StatusOr<Route> again = absl::UnknownError("not run");
  std::optional<RanPlan> again_plan;
  // Where the module hands the case's host buffers to code that could write into them (an external
  // library gets const pointers, which it can cast away), it runs on a private copy and says here
  // what its runs changed in it ("": nothing); nullopt for a module that never exposes them (the
  // builtin kernels read the inputs only from device buffers).
  std::optional<std::string> inputs_changed;
};

class GemmModule {
 public:
  virtual ~GemmModule() = default;

  // Short and file-name safe: it appears in signatures ("ordinary", "folded", "ext-NAME").
  virtual std::string name() const = 0;

  // The arithmetic the module's results follow: the device's calibrated model for GPU
  // modules; nullopt when the module follows the case's model field.
  virtual std::optional<StepModel> model() const = 0;

  // One case, in the one call the harness makes per case: the tactic the module maps it to (the
  // case's own where the module has it, else a deterministic choice among its instantiations),
  // what the dispatch rules demand for it on the layer the harness judged once (`admission`: the
  // route, or the error a fail-closed or impossible request must give), the run into `output`,
  // and, where that run gave a route, the determinism rerun into `again_output` (another tile
  // order where the module has one). Both outputs (rows x n fp16 bits) arrive poisoned. A route
  // that is Unimplemented means "not supported" (never a finding); any other error is compared
  // with the expected one.
  virtual CaseRun RunCase(const FuzzCase& fuzz_case, const LayerAdmission& admission, std::span<uint16_t> output,
                          std::span<uint16_t> again_output) = 0;

  // One launch with a tactic the caller chose (the gate's arms, the benchmarks): the route that
  // ran, as in RunCase.
  virtual absl::StatusOr<Route> Run(const FuzzCase& fuzz_case, const Tactic& tactic, std::span<uint16_t> output) = 0;

  // The plan the last Run reported it ran, as in CaseRun::ran_plan.
  virtual std::optional<RanPlan> ReportedPlan() const { return std::nullopt; }

  // Whether Run takes a case whose codes and scales are not materialized on the host (packed_codes
  // and scale_bytes empty, both from recipes) and reads them where the device holds them: handed
  // over before RunCase by UseDeviceWeights. Every other module is handed the case with its weights
  // materialized on the host.
  virtual bool TakesRecipeWeights() const { return false; }
  // The next case's codes and scales on the device (materialized once per case by fuzz/oracle/'s
  // CaseWeights, which the device oracle reads too), for a module that TakesRecipeWeights, before
  // the RunCase of a case whose weights the host skipped.
  virtual void UseDeviceWeights(const DeviceCaseWeights& weights) { (void)weights; }

  // After each case: device health (a sticky CUDA error becomes a finding here).
  virtual absl::Status CheckHealth() { return absl::OkStatus(); }

  // Drops what the module keeps across cases (a prepared device layer), so that the next case
  // runs as in a fresh process: a finding is confirmed so before it is reported.
  virtual void ForgetState() {}
};

}  // namespace mxdiff::fuzz
