// fuzz_gemm's named checks, each a plain function over (the case, a module's run, the reference
// that judges it), giving its finding and signature; the harness that runs the modules and asks
// fuzz/oracle/ for the reference is gemm_differential.h:
//   cpu-side      the reference agrees with itself single- and multi-threaded (small cases,
//                 or every case where no module is loaded)
//   route         the reported route (or error) is what the dispatch rules demand; a failed
//                 run leaves the output untouched; folded never runs on a refused layer
//   written       every output element was written (the output arrives poisoned)
//   bits          every element equals the reference for the route that ran
//   determinism   the case again, launched in another tile order where the module has one
//                 (the raster swizzle, which never changes bits), gives the same route and bits
//   health        the device is healthy after the case (a sticky CUDA error is a finding)
//   inputs        a module that hands the case's host buffers to foreign code (an external
//                 kernel) runs it on a private copy of them, which must equal the case after each
//                 run (CaseRun::inputs_changed): abi/MODULE/inputs-modified
//   cross-module  ordinary and folded are bit-identical where folded ran on an admitted layer
//   device-vs-cpu the device oracle's bits equal the CPU reference's (fuzz/oracle/reference_service.h)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/driver/findings.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/oracle/case_weights.h"
#include "fuzz/oracle/reference_service.h"
#include "kernels/route.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {

inline constexpr std::string_view kCheckNames[] = {"cpu-side", "route",  "written",      "bits", "determinism",
                                                   "health",   "inputs", "cross-module", kDeviceVsCpuCheckName};
// Each check's index in kCheckNames: the differential names its verdicts through these.
inline constexpr size_t kCpuSideCheck = 0, kRouteCheck = 1, kWrittenCheck = 2, kBitsCheck = 3, kDeterminismCheck = 4,
                        kHealthCheck = 5, kInputsCheck = 6, kCrossModuleCheck = 7, kDeviceVsCpuCheck = 8;

// What one module did with the case (GemmModule::RunCase) and what the harness made of it; repro
// explains the first run's bits.
struct ModuleRun : CaseRun {
  std::string module;
  StepModel model = StepModel::kSm90Emulated;
  std::vector<uint16_t> output, again_output;
  absl::Status health;              // the module's CheckHealth after the case
  std::vector<uint16_t> reference;  // for the route (and reported plan) that ran; empty if it did not run
  CheckResult unjudged;             // why the bits have no reference (an unknown plan, a rejected case)
  bool unsupported = false;         // the module declined the case (Unimplemented, or out of memory)
};

struct CaseEvaluation {
  std::vector<CheckVerdict> verdicts;  // in the order run; every check runs, every finding is kept
  std::vector<ModuleRun> runs;
  const CheckVerdict* FirstFinding() const;
};

// Every named check of one module's run, in this order, appended to `verdicts`: health, inputs
// (where the module exposed them), then, unless it declined, route, and, where a route ran,
// written, bits and determinism. A check whose input is missing is not run.
void CheckModuleRun(const FuzzCase& fuzz_case, const ModuleRun& run, const LayerAdmission& admission,
                    CaseWeights& weights, std::vector<CheckVerdict>& verdicts);
// `cross-module`: the bits of the modules that follow the device's model (null: none ran that way).
CheckResult CheckCrossModule(const std::vector<uint16_t>* ordinary_bits, const std::vector<uint16_t>* folded_bits);
// `cpu-side`, one transform: the reference single-threaded (`single`) and multi-threaded (`multi`).
CheckResult CheckCpuSide(Transform transform, const absl::Status& single_status, const std::vector<uint16_t>& single,
                         const absl::StatusOr<const std::vector<uint16_t>*>& multi);

// "cta_k 64 (chunk 64), 3 split(s), kernel NAME": a reported plan in findings and repro.
std::string DescribeRanPlan(const RanPlan& plan);
// The tactic whose plan the bits were judged by: the route's, with the cta_k and split count the
// module reported where it reported a plan (run.route must hold a route).
Tactic JudgedTactic(const ModuleRun& run);

// The most unusual class (reference/scale_class.h) among the scale bytes (the case's, as
// scale_bytes) of the weight column behind an output element (the signature's last part).
std::string ScaleClassOfColumn(const FuzzCase& fuzz_case, std::span<const uint8_t> scale_bytes, int row, int column);

}  // namespace mxdiff::fuzz
