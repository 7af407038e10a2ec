// An external kernel (fuzz/modules/mxdiff_kernel_abi.h) for the campaign's wall-time test: it
// supports nothing (every call returns MXDIFF_KERNEL_UNSUPPORTED, which is not a finding) until
// MXDIFF_SLOW_KERNEL_AFTER seconds (default 2) have passed since its first call; from then on a
// call never returns, as a worker stuck in one very large input would. Only a signal ends it.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fuzz/modules/mxdiff_kernel_abi.h"

namespace {

int RunSlowKernel(const mxdiff_problem*, uint16_t*, char* message, size_t message_size) {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point first = Clock::now();
  const char* after = std::getenv("MXDIFF_SLOW_KERNEL_AFTER");
  const double seconds = after == nullptr ? 2.0 : std::atof(after);
  if (std::chrono::duration<double>(Clock::now() - first).count() >= seconds) {
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
