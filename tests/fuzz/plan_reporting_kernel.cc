// A fake external kernel for the plan reporting of the kernel C ABI (version 2,
// fuzz/modules/mxdiff_kernel_abi.h): the reference behind the ABI, computing and reporting the
// plans MXDIFF_PLAN_KERNEL says, so external_module_test.cc holds fuzz_gemm's differential to
// what a module reports it ran. Built twice: as a version 2 library, and with
// MXDIFF_PLAN_KERNEL_V1 as a version 1 one, whose ran_plan a version 1 caller never passed (the
// v1 build writes there anyway, as a v1 binary's bytes past its struct could be anything: the
// loader must not read them).
//
// MXDIFF_PLAN_KERNEL (read at each call):
//   requested       (or unset) computes the requested plan and leaves the report alone
//   other           computes and reports cta_k 64 with 2 splits (clamped to k's chunks), label "fake-k64"
//   lie             reports that plan but computes the requested one
//   unknown-cta-k   reports cta_k 7        unknown-splits  reports one split more than k's chunks
//   unknown-label   reports the label "no spaces"
//   unsupported     returns MXDIFF_KERNEL_UNSUPPORTED
//   alternating     "other" on odd calls, "requested" on even ones: a plan that is no function of the request
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "fuzz/modules/reference_behind_abi.h"
#include "reference/split_plan.h"

namespace {

using mxdiff::fuzz::Fail;

constexpr int kOtherCtaK = 64;

int RunPlanReporting(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  if (p->groups <= 0 || p->n <= 0 || p->k <= 0 || p->row_offsets == nullptr) {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "bad problem descriptor");
  }
  const char* mode_text = std::getenv("MXDIFF_PLAN_KERNEL");
  std::string mode = mode_text != nullptr ? mode_text : "requested";
  static int calls = 0;
  if (mode == "alternating") mode = ++calls % 2 == 1 ? "other" : "requested";
  if (mode == "unsupported") return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size, "fake: unsupported");
  mxdiff_plan reported{};
  reported.cta_k = kOtherCtaK;
  reported.splits = mxdiff::effective_splits(p->k, kOtherCtaK, 2);
  std::strcpy(reported.kernel, "fake-k64");
  mxdiff_problem computed = *p;  // what the reference behind the ABI runs
  if (mode == "other") {
    computed.cta_k = reported.cta_k;
    computed.splits = reported.splits;
  } else if (mode == "unknown-cta-k") {
    reported.cta_k = 7;
  } else if (mode == "unknown-splits") {
    reported.splits = mxdiff::split_chunk_count(p->k, kOtherCtaK) + 1;
  } else if (mode == "unknown-label") {
    std::strcpy(reported.kernel, "no spaces");
  } else if (mode != "lie" && mode != "requested") {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "fake: unknown MXDIFF_PLAN_KERNEL " + mode);
  }
  if (int code = mxdiff::fuzz::WriteReferenceBehindAbi(computed, mxdiff::fuzz::OptionsOf(*p), output, message,
                                                       message_size);
      code != MXDIFF_KERNEL_OK) {
    return code;
  }
  if (mode != "requested") *p->ran_plan = reported;
  return MXDIFF_KERNEL_OK;
}

#ifdef MXDIFF_PLAN_KERNEL_V1
constexpr mxdiff_kernel kPlanKernel = {1, "plan-reporter-v1", RunPlanReporting};
#else
constexpr mxdiff_kernel kPlanKernel = {MXDIFF_KERNEL_ABI_VERSION, "plan-reporter", RunPlanReporting};
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  return &kPlanKernel;
}
