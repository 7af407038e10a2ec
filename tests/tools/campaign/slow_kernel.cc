// An external kernel (fuzz/modules/mxdiff_kernel_abi.h) for the campaign's wall-time test: it
// supports nothing (every call returns MXDIFF_KERNEL_UNSUPPORTED, which is not a finding) until the
// file that MXDIFF_SLOW_KERNEL_WHEN names exists (the test creates it once the worker fuzzes); from
// then on a call never returns, as a worker stuck in one very large input would. Only a signal
// ends it. With MXDIFF_SLOW_KERNEL_ABORT_AFTER=N, every call after the process's N-th aborts (a
// crash on an input: in a merge too, once the known cases of fuzz_gemm's start-up are past).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fuzz/modules/mxdiff_kernel_abi.h"

namespace {

int RunSlowKernel(const mxdiff_problem*, uint16_t*, char* message, size_t message_size) {
  static int calls = 0;
  const char* abort_after = std::getenv("MXDIFF_SLOW_KERNEL_ABORT_AFTER");
  if (abort_after != nullptr && ++calls > std::atoi(abort_after)) std::abort();
  const char* when = std::getenv("MXDIFF_SLOW_KERNEL_WHEN");
  if (when != nullptr && access(when, F_OK) == 0) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (message != nullptr && message_size > 0) {
    std::strncpy(message, "the slow test kernel computes nothing", message_size - 1);
    message[message_size - 1] = '\0';
  }
  return MXDIFF_KERNEL_UNSUPPORTED;
}

constexpr mxdiff_kernel kSlowKernel = {MXDIFF_KERNEL_ABI_VERSION, "campaign-slow", RunSlowKernel};

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  return &kSlowKernel;
}
