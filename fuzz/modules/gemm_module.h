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

class GemmModule {
 public:
  virtual ~GemmModule() = default;

  // Short and file-name safe: it appears in signatures ("ordinary", "folded", "ext-NAME").
  virtual std::string name() const = 0;

  // The arithmetic the module's results follow: the device's calibrated model for GPU
  // modules; nullopt when the module follows the case's model field.
  virtual std::optional<StepModel> model() const = 0;

  // The ordinary tactic the module runs for the case: the case's own where the module has
  // it, else a deterministic choice among the module's instantiations.
  virtual Tactic MapTactic(const FuzzCase& fuzz_case) const = 0;

  // What the dispatch rules demand of this module for the case, whose layer the harness has
  // judged once (`admission`): the route, or the error a fail-closed or impossible request must give.
  virtual absl::StatusOr<Route> ExpectedRoute(const FuzzCase& fuzz_case, const Tactic& tactic,
                                              const LayerAdmission& admission) const = 0;

  // Runs the case; `output` (rows x n fp16 bits) arrives poisoned. Returns the route that
  // ran. Unimplemented means "not supported" (never a finding); any other error is compared
  // with ExpectedRoute's.
  virtual absl::StatusOr<Route> Run(const FuzzCase& fuzz_case, const Tactic& tactic, std::span<uint16_t> output) = 0;

  // The plan its last Run reported it ran, as the module read it (unchecked: the differential
  // asks the oracle whether it can model it); nullopt where the route's tactic ran (every builtin
  // module, a version 1 library, a Run that returned no route).
  virtual std::optional<RanPlan> ReportedPlan() const { return std::nullopt; }

  // Whether Run takes a case whose codes and scales are not materialized on the host (packed_codes
  // and scale_bytes empty, both from recipes) and reads them where the device holds them: handed
  // over before Run by UseDeviceWeights. Every other module is handed the case with its weights
  // materialized on the host.
  virtual bool TakesRecipeWeights() const { return false; }
  // The next Runs' case's codes and scales on the device (materialized once per case by
  // fuzz/oracle/'s CaseWeights, which the device oracle reads too), for a module that
  // TakesRecipeWeights, before each Run of a case whose weights the host skipped.
  virtual void UseDeviceWeights(const DeviceCaseWeights& weights) { (void)weights; }

  // Whether Run hands the case's host buffers to code that could write into them (an external
  // library gets const pointers, which it can cast away). The differential then runs it on a
  // private copy of the inputs, so the reference never reads what the module wrote, and compares
  // the copy with the case after each run (the `inputs` check). The builtin modules do not: their
  // kernels read the inputs only from device buffers the runner copies them into.
  virtual bool ExposesHostInputs() const { return false; }

  // The same tactic launched in another tile order (bits must not change), for the
  // determinism rerun; nullopt where the module has no other order.
  virtual std::optional<Tactic> ReorderedTactic(const Tactic&) const { return std::nullopt; }

  // After each case: device health (a sticky CUDA error becomes a finding here).
  virtual absl::Status CheckHealth() { return absl::OkStatus(); }

  // Drops what the module keeps across cases (a prepared device layer), so that the next case
  // runs as in a fresh process: a finding is confirmed so before it is reported.
  virtual void ForgetState() {}
};

}  // namespace mxdiff::fuzz
