// fuzz_gemm's harness, shared with tools/repro: one case through every loaded module against
// the reference, as named checks, each giving its finding and signature:
//   cpu-side      the reference agrees with itself single- and multi-threaded (small cases,
//                 or every case where no module ran)
//   route         the reported route (or error) is what the dispatch rules demand; a failed
//                 run leaves the output untouched; folded never runs on a refused layer
//   written       every output element was written (the output arrives poisoned)
//   bits          every element equals the reference for the route that ran
//   determinism   the case again, launched in another tile order where the module has one
//                 (the raster swizzle, which never changes bits), gives the same route and bits
//   health        the device is healthy after the case (a sticky CUDA error is a finding)
//   cross-module  ordinary and folded are bit-identical where folded ran on an admitted layer
// Each module runs once per case (plus the determinism rerun); the reference is computed once
// per (transform, model, split partition) within a case.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"
#include "fuzz/modules/gemm_module.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {

// No kernel writes this: every NaN a kernel produces is the canonical 0x7FFF (docs/numerics.md).
inline constexpr uint16_t kOutputPoison = 0x7E5A;

inline constexpr std::string_view kCheckNames[] = {"cpu-side", "route",  "written",     "bits",
                                                   "determinism", "health", "cross-module"};
// Each check's index in kCheckNames: the differential names its verdicts through these.
inline constexpr size_t kCpuSideCheck = 0, kRouteCheck = 1, kWrittenCheck = 2, kBitsCheck = 3, kDeterminismCheck = 4,
                        kHealthCheck = 5, kCrossModuleCheck = 6;

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
  bool unsupported = false;         // the module declined the case (Unimplemented)
};

struct CaseEvaluation {
  std::vector<CheckVerdict> verdicts;  // in the order run; stops after the first finding
  std::vector<ModuleRun> runs;
  const CheckVerdict* FirstFinding() const;
};

class GemmDifferential {
 public:
  explicit GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules);

  // Runs the checks, stopping at the first finding.
  CaseEvaluation Evaluate(const FuzzCase& fuzz_case);
  CheckResult CheckCase(const FuzzCase& fuzz_case);
  // Every module's state across cases dropped (GemmModule::ForgetState).
  void ForgetState();

  const std::vector<std::unique_ptr<GemmModule>>& modules() const { return modules_; }
  // Cases in which at least one module ran, and module runs skipped as unsupported.
  size_t cases_compared() const { return cases_compared_; }
  size_t runs_unsupported() const { return runs_unsupported_; }

 private:
  struct ReferenceKey {
    Transform transform;
    StepModel model;
    int cta_k;
    int splits;  // effective
    auto operator<=>(const ReferenceKey&) const = default;
  };
  absl::StatusOr<const std::vector<uint16_t>*> Reference(const FuzzCase& fuzz_case, Transform transform,
                                                         StepModel model, const Tactic& tactic);
  CheckResult CheckCpuSide(const FuzzCase& fuzz_case);
  // Runs the module and its checks; false when a finding stopped the evaluation.
  bool EvaluateModule(const FuzzCase& fuzz_case, GemmModule& module, const LayerAdmission& admission,
                      CaseEvaluation& evaluation);

  std::vector<std::unique_ptr<GemmModule>> modules_;
  std::map<ReferenceKey, std::vector<uint16_t>> reference_cache_;
  bool layer_admitted_ = false;  // of the case being evaluated
  size_t cases_compared_ = 0;
  size_t runs_unsupported_ = 0;
};

// The most unusual class (reference/scale_class.h) among the scale bytes of the weight column
// behind an output element (the signature's last part).
std::string ScaleClassOfColumn(const FuzzCase& fuzz_case, int row, int column);

// ulp distance between two fp16 bit patterns on the ordered number line (NaN: 65536).
int F16UlpDistance(uint16_t a, uint16_t b);
// "3 ulp", "a NaN payload difference" or "NaN against a number".
std::string F16DistanceText(uint16_t a, uint16_t b);

}  // namespace mxdiff::fuzz
