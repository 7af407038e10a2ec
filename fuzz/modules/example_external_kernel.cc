// An example external kernel for fuzz/modules/mxdiff_kernel_abi.h, built as a shared library
// (libmxdiff_example_kernel.so). It is the CPU reference behind the C ABI: it proves the ABI
// end to end (loading, layouts, poisoned output, the unsupported path) and is the template
// for wrapping a user's own GPU kernel. It runs the requested split-K plan, so it leaves the
// plan report (ABI version 2, `ran_plan`) as the caller pre-filled it. Set
// MXDIFF_EXAMPLE_KERNEL_FLIP=1 to make it flip the lowest bit of one output element, which shows
// what a finding looks like.
#include <cstdlib>
#include <cstring>

#include "fmt/format.h"
#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "fuzz/modules/reference_behind_abi.h"
#include "reference/reference_gemm.h"

namespace {

using mxdiff::fuzz::Fail;

int RunExample(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  if (p->groups <= 0 || p->n <= 0 || p->k <= 0 || p->row_offsets == nullptr) {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "bad problem descriptor");
  }
  if (p->transform < 0 || p->transform > 1 || p->step_model < 0 || p->step_model >= mxdiff::kStepModelCount) {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size,
                fmt::format("transform {} / step model {} unknown", p->transform, p->step_model));
  }
  if (int code = mxdiff::fuzz::WriteReferenceBehindAbi(*p, mxdiff::fuzz::OptionsOf(*p), output, message, message_size);
      code != MXDIFF_KERNEL_OK) {
    return code;
  }
  const char* flip = std::getenv("MXDIFF_EXAMPLE_KERNEL_FLIP");
  const size_t elements = size_t(p->row_offsets[p->groups]) * size_t(p->n);
  if (flip != nullptr && std::strcmp(flip, "1") == 0 && elements > 0) output[elements / 2] ^= 1;
  return MXDIFF_KERNEL_OK;
}

constexpr mxdiff_kernel kExampleKernel = {MXDIFF_KERNEL_ABI_VERSION, "example-reference", RunExample};

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  return &kExampleKernel;
}
