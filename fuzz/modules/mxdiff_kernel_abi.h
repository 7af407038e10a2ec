/* The C ABI through which fuzz_gemm (and tools/repro) load an external kernel from a shared
 * library and fuzz it against the mxdiff reference. A library exports one function,
 *
 *     const mxdiff_kernel* mxdiff_kernel_entry(void);
 *
 * returning a pointer to a static descriptor. Everything crosses as plain C data: fp16 and fp32
 * values as raw bits, sizes as int32. The layouts are those of reference/problem.h:
 *
 *   activations  rows x k fp16 bits, row-major, rows = row_offsets[groups]
 *   row_offsets  groups + 1 ascending int32, row_offsets[0] = 0 (a group may own no rows)
 *   packed_codes per group n x k/2 bytes (weight row j, low nibble = even k), E2M1 codes
 *   scale_bytes  per group n x k/32 raw UE8M0 bytes (the kernel prepares them itself)
 *   output       rows x n fp16 bits, row-major; the caller fills it with a poison pattern first,
 *                so an element the kernel does not write is detected
 *
 * `transform` says which dequantization the caller expects (0 ordinary, 1 folded:
 * docs/numerics.md, transforms), `cta_k` and `splits` the split-K partition the result must follow
 * (docs/numerics.md, reduction order; reference/split_plan.h), `step_model` the arithmetic (reference/step_model.h: 0 v100,
 * 1 sm90-emulated, 2 sm90-emulated-ftz, 3 exact). A kernel that cannot honour a request returns
 * MXDIFF_KERNEL_UNSUPPORTED: that is not a finding. MXDIFF_KERNEL_FAILED is one, as is any
 * output bit that differs from the reference.
 *
 * The inputs (row_offsets, activations, packed_codes, scale_bytes) are read-only, whatever a cast
 * allows: fuzz_gemm and repro hand the kernel a private copy, compare it with the case after the
 * call, and a kernel that wrote into it is a finding of its own (abi/ext-NAME/inputs-modified);
 * the reference is computed from the case, never from what the kernel saw.
 *
 * The library must not keep pointers past the call and must be callable again with the same
 * inputs (fuzz_gemm runs every case twice to check determinism). Version: a library built
 * against another MXDIFF_KERNEL_ABI_VERSION is refused at load time.
 */
#ifndef MXDIFF_FUZZ_MODULES_MXDIFF_KERNEL_ABI_H_
#define MXDIFF_FUZZ_MODULES_MXDIFF_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MXDIFF_KERNEL_ABI_VERSION 1

#define MXDIFF_KERNEL_OK 0
#define MXDIFF_KERNEL_UNSUPPORTED 1
#define MXDIFF_KERNEL_FAILED 2

typedef struct mxdiff_problem {
  int32_t groups;
  int32_t n;
  int32_t k;
  const int32_t* row_offsets;
  const uint16_t* activations;
  const uint8_t* packed_codes;
  const uint8_t* scale_bytes;
  int32_t transform;
  int32_t cta_k;
  int32_t splits;
  int32_t step_model;
} mxdiff_problem;

typedef struct mxdiff_kernel {
  uint32_t abi_version; /* MXDIFF_KERNEL_ABI_VERSION */
  const char* name;     /* short, file-name safe: used in finding signatures */
  /* Returns an MXDIFF_KERNEL_* code; on UNSUPPORTED or FAILED writes a NUL-terminated reason
   * of at most message_size bytes into message. A FAILED reason may start with its kind:
   * lower-case words ([a-z0-9_-]) joined by '/', at least two, then ": " (e.g. "python/bound: 3
   * elements outside the bound"); fuzz_gemm then adds the kind to the finding's signature
   * (route/ext-NAME/unexpected-error/python/bound), so failures of different kinds are kept and
   * deduplicated apart. */
  int (*run)(const mxdiff_problem* problem, uint16_t* output, char* message, size_t message_size);
} mxdiff_kernel;

typedef const mxdiff_kernel* (*mxdiff_kernel_entry_fn)(void);
#define MXDIFF_KERNEL_ENTRY_SYMBOL "mxdiff_kernel_entry"

#ifdef __cplusplus
}
#endif

#endif /* MXDIFF_FUZZ_MODULES_MXDIFF_KERNEL_ABI_H_ */
