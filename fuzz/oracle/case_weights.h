// Where one fuzz_gemm case's weights are, and each view of them, got once per case: the case's own
// host tensors, or (where the decoder skipped them: fuzz_gemm's device way) the scales, the whole
// case or the groups with rows materialized on the host when something needs them (a CPU reference,
// a finding, a module that does not take recipe weights); and the device's materialization of the
// same recipes (../modules/device_recipe_weights.h), asked for here alone and handed to the kernel
// modules and the device oracle. The case is handed over once (Begin); every view reads it from
// there. Owned by the target's state (../checks/gemm_differential.h), never the process.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/driver/gemm_counters.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "reference/problem.h"

namespace mxdiff::fuzz {

// Whether the case holds `kind`'s bytes on the host: literal bytes, a recipe the decoder
// materialized, or no elements at all. The one answer to "are this case's weights on the host".
bool TensorOnHost(const FuzzCase& fuzz_case, TensorKind kind);

class CaseWeights {
 public:
  // Materializing on the host is counted as decoding (Phase::kDecode), a late one in `counters`.
  // `device`: the device's materialization of recipe weights (null: none, e.g. a build without CUDA).
  CaseWeights(DifferentialCounters& counters, std::unique_ptr<DeviceRecipeWeights> device);
  CaseWeights(const CaseWeights&) = delete;
  CaseWeights& operator=(const CaseWeights&) = delete;

  // A new case, read by every view below until the next Begin (it must outlive them): every view
  // is made again (the same case object may hold another case now).
  void Begin(const FuzzCase& fuzz_case);
  const FuzzCase& fuzz_case() const { return *case_; }
  // The case arrived without some of its weights on the host (TensorOnHost).
  bool deferred() const { return deferred_; }
  // ... and some were materialized on the host after all (counted as host_weights_late).
  bool late() const { return late_; }

  // The case's scale bytes on the host: its own, or (once per case) materialized from the recipe.
  std::span<const uint8_t> HostScales();
  // The case with its weights on the host: itself, or (once per case) a copy with them materialized.
  const FuzzCase& HostCase();
  // The groups with rows alone (an output element reads only its row's group, so the bits are the
  // same): what the device oracle is handed, so a 256-expert layer with 6 routed experts crosses
  // PCIe as 6 experts, not 570 MB; and what the CPU reference computes where the host skipped the
  // weights, those experts' codes then materialized from the recipe (MaterializeCodeSlice).
  // Built once per case; the whole case's problem where every group has rows and nothing was skipped.
  GroupedProblem RowGroupsProblem();
  // What the CPU reference computes: the case's problem, or RowGroupsProblem where weights were skipped.
  GroupedProblem CpuProblem() { return deferred_ ? RowGroupsProblem() : case_->Problem(); }
  // The case's codes and scales (both recipes) where the device materialized them, with their fold
  // admission counted there: asked for once per case (an error too is kept for the case), and
  // kept by the device while the next case has the same recipes. Unavailable where there is no
  // device materialization; DeviceRecipeWeights::Of's errors otherwise.
  absl::StatusOr<const DeviceCaseWeights*> OnDevice();
  // The device's materializations since the start (a test counts that the oracle and the kernels share one).
  size_t device_materializations() const { return device_ != nullptr ? device_->materializations() : 0; }
  // The next case materializes its weights on the device again (a finding's confirmation runs as in
  // a fresh process).
  void ForgetState();

 private:
  DifferentialCounters& counters_;
  std::unique_ptr<DeviceRecipeWeights> device_;
  const FuzzCase* case_ = nullptr;
  bool deferred_ = false, late_ = false;
  bool host_case_ready_ = false;  // host_case_ holds the case with its weights
  bool scales_ready_ = false;     // host_scales_ holds the case's scales
  bool row_groups_ready_ = false;
  std::optional<absl::StatusOr<const DeviceCaseWeights*>> on_device_;  // this case's, once asked for
  FuzzCase host_case_;                // reused across cases
  std::vector<uint8_t> host_scales_;  // reused across cases
  struct RowGroups {                  // RowGroupsProblem's storage, reused across cases
    int groups = 0;
    std::vector<int32_t> row_offsets;
    std::vector<uint8_t> codes, scales;
  } row_groups_;
};

}  // namespace mxdiff::fuzz
