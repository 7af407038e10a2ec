// An external kernel (fuzz/modules/mxdiff_kernel_abi.h) that breaks the harness the ways a new
// user's kernel did (issue 34), so that the campaign and repro are tested on each: a testing tool
// must never pass a kernel because the kernel broke it. MXDIFF_HOSTILE_KERNEL chooses:
//   segv            dereferences a null pointer on its first call
//   overflow        writes one element past the output on its first call (AddressSanitizer:
//                   heap-buffer-overflow)
//   decline         returns MXDIFF_KERNEL_UNSUPPORTED for every case: it compares nothing
//   flush-in-place  flushes the subnormal activations to zero in the caller's (const) input, then
//                   computes the reference on them correctly: its defect shows only if the oracle
//                   never reads buffers the kernel could write
//   write-row-offsets, write-activations, write-codes, write-scales
//                   writes into that input (every row to one group; every activation 0; the first
//                   code byte; the first scale byte), then computes the reference on what it wrote
// Unset or anything else: MXDIFF_KERNEL_FAILED naming the variable (never a silent reference).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/modules/kernel_abi_support.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "fuzz/modules/reference_behind_abi.h"
#include "reference/reference_gemm.h"

namespace {

using mxdiff::fuzz::Fail;

bool IsSubnormal(uint16_t bits) { return (bits & 0x7C00) == 0 && (bits & 0x03FF) != 0; }

int RunHostileKernel(const mxdiff_problem* p, uint16_t* output, char* message, size_t message_size) {
  const char* chosen = std::getenv("MXDIFF_HOSTILE_KERNEL");
  const std::string mode = chosen == nullptr ? "" : chosen;
  if (mode == "decline") {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size, "the hostile test kernel declines every case");
  }
  if (mode != "segv" && mode != "overflow" && mode != "flush-in-place" && !mode.starts_with("write-")) {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size,
                "MXDIFF_HOSTILE_KERNEL must be segv, overflow, decline, flush-in-place or write-INPUT, not '" + mode +
                    "'");
  }
  if (p->groups <= 0 || p->n <= 0 || p->k <= 0 || p->row_offsets == nullptr || p->transform < 0 ||
      p->transform > 1 || p->step_model < 0 || p->step_model >= mxdiff::kStepModelCount) {
    return Fail(MXDIFF_KERNEL_UNSUPPORTED, message, message_size, "descriptor outside what this kernel knows");
  }
  const size_t rows = size_t(p->row_offsets[p->groups]);
  const size_t outputs = rows * size_t(p->n);
  if (mode == "segv") {
    volatile uint16_t* nowhere = nullptr;
    *nowhere = 1;
  }
  if (mode == "overflow") {
    // Through memcpy, so AddressSanitizer's interceptor sees it even where this library is not instrumented.
    std::vector<uint16_t> one_too_many(outputs + 1, 0x3C00);
    std::memcpy(output, one_too_many.data(), one_too_many.size() * sizeof(uint16_t));
    return MXDIFF_KERNEL_OK;
  }
  // The caller's inputs are const; this kernel writes them anyway.
  uint16_t* activations = const_cast<uint16_t*>(p->activations);
  if (mode == "flush-in-place") {
    for (size_t i = 0; i < rows * size_t(p->k); ++i) {
      if (IsSubnormal(activations[i])) activations[i] &= 0x8000;
    }
  } else if (mode == "write-row-offsets") {  // every row to group 0, or every row to the last group
    int32_t* offsets = const_cast<int32_t*>(p->row_offsets);
    std::fill(offsets + 1, offsets + p->groups, offsets[1] != 0 ? 0 : int32_t(rows));
  } else if (mode == "write-activations") {
    std::fill(activations, activations + rows * size_t(p->k), uint16_t{0});
  } else if (mode == "write-codes") {
    const_cast<uint8_t*>(p->packed_codes)[0] ^= 0x11;
  } else if (mode == "write-scales") {
    const_cast<uint8_t*>(p->scale_bytes)[0] ^= 1;
  } else {
    return Fail(MXDIFF_KERNEL_FAILED, message, message_size, "MXDIFF_HOSTILE_KERNEL: no input named in '" + mode + "'");
  }
  if (int code = mxdiff::fuzz::WriteReferenceBehindAbi(*p, mxdiff::fuzz::OptionsOf(*p), output, message, message_size);
      code != MXDIFF_KERNEL_OK) {
    return code;
  }
  return MXDIFF_KERNEL_OK;
}

constexpr mxdiff_kernel kHostileKernel = {MXDIFF_KERNEL_ABI_VERSION, "hostile", RunHostileKernel};

}  // namespace

extern "C" __attribute__((visibility("default"))) const mxdiff_kernel* mxdiff_kernel_entry(void) {
  return &kHostileKernel;
}
