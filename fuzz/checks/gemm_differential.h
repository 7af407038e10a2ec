// fuzz_gemm's harness, shared with tools/repro: one case through every loaded module, each run
// judged by the named checks of gemm_checks.h against the reference fuzz/oracle/'s
// ReferenceService chooses (the CPU's, or for large cases the device oracle's with a CPU-checked
// sample); the case's weights are where fuzz/oracle/'s CaseWeights says. Each module runs once
// per case, in one call (GemmModule::RunCase, which also makes the determinism rerun), and its
// checks are one call (CheckModuleRun). The counters are fuzz/driver/gemm_counters.h's.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuzz/checks/gemm_checks.h"
#include "fuzz/checks/output_scan.h"
#include "fuzz/driver/gemm_counters.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/modules/gemm_module.h"
#include "fuzz/modules/reference_oracle.h"
#include "fuzz/oracle/case_weights.h"
#include "fuzz/oracle/reference_service.h"

namespace mxdiff::fuzz {

class GemmDifferential {
 public:
  // `device_oracle`: the second oracle for large cases (null: the CPU reference for every case).
  // `device_weights`: where a case's recipe weights are materialized on the device for the kernel
  // modules and the device oracle, once per case (CaseWeights::OnDevice; null: nowhere).
  explicit GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules,
                            std::unique_ptr<ReferenceOracle> device_oracle = nullptr, OracleSettings settings = {},
                            std::unique_ptr<DeviceRecipeWeights> device_weights = MakeDeviceRecipeWeights());
  // Its parts hold references to its counters and weights: never copied or moved.
  GemmDifferential(const GemmDifferential&) = delete;
  GemmDifferential& operator=(const GemmDifferential&) = delete;

  // Runs every module and every named check; each verdict is kept (a check whose input is
  // missing, e.g. the bits of a run that returned an error, is not run). `input`: the bytes the
  // case was decoded from, whose hash picks the CPU-checked sample (empty: the case's encoding).
  // A case whose codes and scales come from recipes may arrive without them (packed_codes and
  // scale_bytes empty): they are then materialized on the host only where a CPU reference, a
  // finding or a module that does not take recipe weights needs them (CaseWeights).
  CaseEvaluation Evaluate(const FuzzCase& fuzz_case, std::span<const uint8_t> input = {});
  // Whether the case (its description is enough) needs its weights on the host
  // (ReferenceService::NeedsHostWeights over this differential's modules).
  bool NeedsHostWeights(const FuzzCase& fuzz_case) const { return references_.NeedsHostWeights(fuzz_case, modules_); }
  CheckResult CheckCase(const FuzzCase& fuzz_case, std::span<const uint8_t> input = {});
  // Every module's state across cases dropped (GemmModule::ForgetState), and the oracle's.
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
    fuzz::AddCaseSeconds(counters_, ShapeClassOf(fuzz_case), seconds, phases_before);
  }
  const ReferenceOracle* device_oracle() const { return references_.device_oracle(); }
  const CaseWeights& weights() const { return weights_; }
  const OracleSettings& oracle_settings() const { return references_.settings(); }
  // Why the device oracle last fell back to the CPU (empty: never).
  const std::string& last_fallback() const { return references_.last_fallback(); }

 private:
  CaseEvaluation EvaluateAll(const FuzzCase& fuzz_case);
  // The module's run and every named check of it, every verdict kept.
  void EvaluateModule(const FuzzCase& fuzz_case, GemmModule& module, const LayerAdmission& admission,
                      CaseEvaluation& evaluation);
  // The module's RunCase: a module that takes recipe weights reads them where the device holds
  // them when the host skipped them; every other module gets the case with its weights on the host.
  CaseRun RunModule(GemmModule& module, const FuzzCase& fuzz_case, const LayerAdmission& admission, ModuleRun& run);
  // The reference for the plan that ran (ReferenceService::Judge) into run.reference, or why there
  // is none into run.unjudged.
  void Judge(const FuzzCase& fuzz_case, ModuleRun& run, std::vector<CheckVerdict>& verdicts);
  CheckResult CpuSide(const FuzzCase& fuzz_case, CaseEvaluation& evaluation);

  std::vector<std::unique_ptr<GemmModule>> modules_;
  DifferentialCounters counters_;
  CaseWeights weights_;
  ReferenceService references_;
  size_t cases_compared_ = 0;
  size_t runs_unsupported_ = 0;
};

// fuzz_gemm's decoding of an input for `differential`, once: the case's fields, then every tensor
// materialized on the host except the codes and scales where NeedsHostWeights says no (they are
// then left empty: only the device materializes them). `memo` speeds up the materialization as in
// the fuzz loop (tensor payloads of `fuzz_case` are reused). Returns whether the weights were
// skipped; an input that does not decode is an error.
absl::StatusOr<bool> DecodeForDifferential(std::span<const uint8_t> input, const GemmDifferential& differential,
                                           FuzzCase& fuzz_case, MaterializationMemo* memo);

}  // namespace mxdiff::fuzz
