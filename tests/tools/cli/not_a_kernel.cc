// Shared libraries that load but are not kernels (fuzz/modules/mxdiff_kernel_abi.h), for the CLI
// contract: repro --external on each is bad input (exit 2) naming what is wrong, never a finding.
// The CMake target chooses one by a definition:
//   MXDIFF_NOT_A_KERNEL_NO_ENTRY    no mxdiff_kernel_entry at all
//   MXDIFF_NOT_A_KERNEL_ABI_999     a descriptor of ABI version 999
//   MXDIFF_NOT_A_KERNEL_NULL_ENTRY  mxdiff_kernel_entry returns null
//   MXDIFF_NOT_A_KERNEL_BAD_NAME    a kernel whose name is not file-name safe (it names findings)
#include <cstddef>
#include <cstdint>

#include "fuzz/modules/mxdiff_kernel_abi.h"

namespace {

[[maybe_unused]] int RunNothing(const mxdiff_problem*, uint16_t*, char*, size_t) { return MXDIFF_KERNEL_OK; }

}  // namespace

#if defined(MXDIFF_NOT_A_KERNEL_NO_ENTRY)
extern "C" __attribute__((visibility("default"))) int mxdiff_not_a_kernel(void) { return 0; }
#elif defined(MXDIFF_NOT_A_KERNEL_ABI_999)
extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  static constexpr mxdiff_kernel kFuture = {999, "future", RunNothing};
  return &kFuture;
}
#elif defined(MXDIFF_NOT_A_KERNEL_NULL_ENTRY)
extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) { return nullptr; }
#elif defined(MXDIFF_NOT_A_KERNEL_BAD_NAME)
extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  static constexpr mxdiff_kernel kSpaced = {MXDIFF_KERNEL_ABI_VERSION, "my kernel", RunNothing};
  return &kSpaced;
}
#else
#error "define one of MXDIFF_NOT_A_KERNEL_NO_ENTRY, _ABI_999, _NULL_ENTRY, _BAD_NAME"
#endif
