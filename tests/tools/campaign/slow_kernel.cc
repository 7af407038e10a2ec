// An external kernel (fuzz/modules/mxdiff_kernel_abi.h) for the campaign's wall-time test: it
// computes the reference (so its worker fuzzes and compares, fuzz/modules/reference_behind_abi.h)
// until the file that MXDIFF_SLOW_KERNEL_WHEN names exists (the test creates it once the worker
// fuzzes); from then on a call never returns, as a worker stuck in one very large input would.
// Only a signal ends it. With MXDIFF_SLOW_KERNEL_ABORT_AFTER=N, every call after the process's
// N-th aborts (a crash on an input: in a merge too, once the known cases of fuzz_gemm's start-up
// are past).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "fuzz/modules/reference_behind_abi.h"
#include "reference/reference_gemm.h"

namespace {

int RunSlowKernel(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  static int calls = 0;
  const char* abort_after = std::getenv("MXDIFF_SLOW_KERNEL_ABORT_AFTER");
  if (abort_after != nullptr && ++calls > std::atoi(abort_after)) std::abort();
  const char* when = std::getenv("MXDIFF_SLOW_KERNEL_WHEN");
  if (when != nullptr && access(when, F_OK) == 0) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (p->groups <= 0 || p->n <= 0 || p->k <= 0 || p->row_offsets == nullptr || p->transform < 0 ||
      p->transform > 1 || p->step_model < 0 || p->step_model >= mxdiff::kStepModelCount) {
    return mxdiff::fuzz::Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size,
                              "descriptor outside what this kernel knows");
  }
  if (int code = mxdiff::fuzz::WriteReferenceBehindAbi(*p, mxdiff::fuzz::OptionsOf(*p), output, message, message_size);
      code != MXDIFF_KERNEL_OK) {
    return code;
  }
  return MXDIFF_KERNEL_OK;
}

constexpr mxdiff_kernel kSlowKernel = {MXDIFF_KERNEL_ABI_VERSION, "campaign-slow", RunSlowKernel};

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  return &kSlowKernel;
}
