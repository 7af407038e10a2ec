// An external kernel (fuzz/modules/mxdiff_kernel_abi.h) for the CLI contract test: the reference
// behind the ABI with one deliberate deviation chosen by MXDIFF_TEST_KERNEL, so that repro's
// explanation can be checked against a known cause:
//   other-transform  computes the transform the caller did not ask for
//   model=NAME       computes under step model NAME instead of the case's
//   flip-if-k-at-least=K  flips the lowest bit of the first output element when K >= this (a
//                    planted defect that repro --minimize must keep while it shrinks the rest)
//   flip-after-n=N   flips the lowest bit of the first output element of every problem whose N
//                    differs from this, once a problem with this N has run in the process (a
//                    defect that needs an earlier input: repro --sequence)
// Unset, it is the reference (no mismatch).
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "fuzz/modules/reference_behind_abi.h"
#include "reference/reference_gemm.h"

namespace {

using mxdiff::fuzz::Fail;

int RunTestKernel(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  if (p->groups <= 0 || p->n <= 0 || p->k <= 0 || p->row_offsets == nullptr || p->transform < 0 ||
      p->transform > 1 || p->step_model < 0 || p->step_model >= mxdiff::kStepModelCount) {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size, "descriptor outside what this kernel knows");
  }
  mxdiff::ReferenceOptions options;
  options.transform = mxdiff::Transform(p->transform);
  options.model = mxdiff::StepModel(p->step_model);
  const char* deviation = std::getenv("MXDIFF_TEST_KERNEL");
  const std::string mode = deviation == nullptr ? "" : deviation;
  if (mode == "other-transform") {
    options.transform = options.transform == mxdiff::Transform::kOrdinary ? mxdiff::Transform::kFolded
                                                                          : mxdiff::Transform::kOrdinary;
  } else if (mode.rfind("model=", 0) == 0) {
    const std::optional<mxdiff::StepModel> model = mxdiff::ParseStepModel(mode.substr(6));
    if (!model) return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "MXDIFF_TEST_KERNEL: unknown model " + mode);
    options.model = *model;
  } else if (mode.rfind("flip-if-k-at-least=", 0) == 0 || mode.rfind("flip-after-n=", 0) == 0) {
    // Computed below, after the reference's result.
  } else if (!mode.empty()) {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "MXDIFF_TEST_KERNEL: unknown mode " + mode);
  }
  std::vector<uint16_t> result;
  if (int code = mxdiff::fuzz::RunReferenceBehindAbi(*p, options, result, message, message_size);
      code != MXDIFF_KERNEL_OK) {
    return code;
  }
  bool flip = false;
  if (mode.rfind("flip-if-k-at-least=", 0) == 0) {
    flip = p->k >= std::atoi(mode.c_str() + std::strlen("flip-if-k-at-least="));
  } else if (mode.rfind("flip-after-n=", 0) == 0) {
    static bool armed = false;  // a problem with the arming N ran in this process
    const int arming_n = std::atoi(mode.c_str() + std::strlen("flip-after-n="));
    if (p->n == arming_n) armed = true;
    else flip = armed;
  }
  if (flip && !result.empty()) result[0] ^= 1;
  if (!result.empty()) std::memcpy(output, result.data(), result.size() * sizeof(uint16_t));
  return MXDIFF_KERNEL_OK;
}

constexpr mxdiff_kernel kTestKernel = {MXDIFF_KERNEL_ABI_VERSION, "cli-test", RunTestKernel};

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  return &kTestKernel;
}
