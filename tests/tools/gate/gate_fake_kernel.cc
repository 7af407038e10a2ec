// Kernel libraries (fuzz/modules/mxdiff_kernel_abi.h) for `mxdiff gate --baseline_kernel
// --candidate_kernel` on the CPU: the reference behind the ABI, each variant with one property
// chosen by the CMake target's definition:
//   GATE_FAKE_KERNEL_V1           declares ABI version 1 (the gate refuses it beside a version 2 one)
//   GATE_FAKE_KERNEL_FOLDED_ONLY  refuses the ordinary transform, as libmxdiff_turbomind_folded_kernel.so
//                                 does (a GEMM the fold cannot take must go to the baseline)
//   GATE_FAKE_KERNEL_FLIP_FOLDED  flips the lowest bit of one output element of every folded request
#include "fmt/format.h"
#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "fuzz/modules/reference_behind_abi.h"
#include "reference/reference_gemm.h"

namespace {

using mxdiff::fuzz::Fail;

int RunFake(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  if (p->groups <= 0 || p->n <= 0 || p->k <= 0 || p->row_offsets == nullptr) {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "bad problem descriptor");
  }
  if (p->transform < 0 || p->transform > 1 || p->step_model < 0 || p->step_model >= mxdiff::kStepModelCount) {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size,
                fmt::format("transform {} / step model {} unknown", p->transform, p->step_model));
  }
#if defined(GATE_FAKE_KERNEL_FOLDED_ONLY)
  if (p->transform != 1) {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size, "this fake runs the folded transform only");
  }
#endif
  if (int code = mxdiff::fuzz::WriteReferenceBehindAbi(*p, mxdiff::fuzz::OptionsOf(*p), output, message, message_size);
      code != MXDIFF_KERNEL_OK) {
    return code;
  }
#if defined(GATE_FAKE_KERNEL_FLIP_FOLDED)
  const size_t elements = size_t(p->row_offsets[p->groups]) * size_t(p->n);
  if (p->transform == 1 && elements > 0) output[elements / 2] ^= 1;
#endif
  return MXDIFF_KERNEL_OK;
}

#if defined(GATE_FAKE_KERNEL_V1)
constexpr mxdiff_kernel kFake = {1, "gate-fake-v1", RunFake};
#elif defined(GATE_FAKE_KERNEL_FOLDED_ONLY)
constexpr mxdiff_kernel kFake = {MXDIFF_KERNEL_ABI_VERSION, "gate-fake-folded-only", RunFake};
#else
constexpr mxdiff_kernel kFake = {MXDIFF_KERNEL_ABI_VERSION, "gate-fake-flip-folded", RunFake};
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) { return &kFake; }
