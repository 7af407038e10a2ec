// The CPU reference behind the C ABI of mxdiff_kernel_abi.h, for the external kernels built on
// it (the example kernel, the CLI test's kernel): the descriptor's problem and tactic run
// through ReferenceGemm on one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {

// The reference's output for descriptor `p` (its shape checked by the caller) under `options`
// (transform and step model as the caller chose them; the tactic is the descriptor's) into
// `result`. Returns MXDIFF_KERNEL_OK, or MXDIFF_KERNEL_UNSUPPORTED with the reference's message.
inline int RunReferenceBehindAbi(const mxdiff_problem& p, ReferenceOptions options, std::vector<uint16_t>& result,
                                 char* message, size_t message_size) {
  const GroupedProblem problem = ProblemOf(p);
  options.tactic.cta_k = p.cta_k;
  options.tactic.splits = p.splits;
  options.threads = 1;
  if (absl::Status status = ReferenceGemm(problem, options, result); !status.ok()) {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size, std::string(status.message()));
  }
  return MXDIFF_KERNEL_OK;
}

// The descriptor's own transform and step model as reference options (the caller has checked both
// are known).
inline ReferenceOptions OptionsOf(const mxdiff_problem& p) {
  ReferenceOptions options;
  options.transform = Transform(p.transform);
  options.model = StepModel(p.step_model);
  return options;
}

// RunReferenceBehindAbi's result written into the caller's `output` (rows x n fp16 bits).
inline int WriteReferenceBehindAbi(const mxdiff_problem& p, const ReferenceOptions& options, uint16_t* output,
                                   char* message, size_t message_size) {
  std::vector<uint16_t> result;
  if (int code = RunReferenceBehindAbi(p, options, result, message, message_size); code != MXDIFF_KERNEL_OK) {
    return code;
  }
  std::copy(result.begin(), result.end(), output);
  return MXDIFF_KERNEL_OK;
}

}  // namespace mxdiff::fuzz
