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
 *   With no rows (row_offsets[groups] = 0), activations and output may be NULL.
 *
 * `transform` says which dequantization the caller expects (0 ordinary, 1 folded:
 * docs/numerics.md, transforms), `cta_k` and `splits` the split-K partition the result must follow
 * (docs/numerics.md, reduction order; reference/split_plan.h; version 2: unless the kernel reports
 * another, below), `step_model` the arithmetic (reference/step_model.h: 0 v100,
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
 * inputs (fuzz_gemm runs every case twice to check determinism).
 *
 * Versions: a descriptor says the version it was written for; versions 1 and 2 load, any other
 * is refused at load time.
 *   1  the kernel computes the requested partition (cta_k, splits) and is judged against it.
 *   2  the kernel may run another partition than the requested one, and says which: before the
 *      call the caller fills `*ran_plan` with the requested plan (cta_k, and splits clamped as
 *      reference/split_plan.h's effective_splits clamps them; kernel ""); a kernel that ran
 *      another one overwrites it. fuzz_gemm then holds the output to the reported plan. A
 *      reported plan the reference cannot model (cta_k not a multiple of 4 in [4, 256], splits
 *      outside 1 .. the number of chunks of lcm(32, cta_k) in k, a label that is not a
 *      NUL-terminated [A-Za-z0-9._-] string) is a finding (abi/ext-NAME/unknown-plan); so is a
 *      plan whose bits the output does not follow (a mismatch). The plan must be a function of
 *      the request (repro replays it). `ran_plan` is read only after MXDIFF_KERNEL_OK.
 * A version 1 library never sees `ran_plan` (it is past the end of its struct): it still loads.
 */
#ifndef MXDIFF_FUZZ_MODULES_MXDIFF_KERNEL_ABI_H_
#define MXDIFF_FUZZ_MODULES_MXDIFF_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MXDIFF_KERNEL_ABI_VERSION 2
#define MXDIFF_KERNEL_ABI_OLDEST_VERSION 1 /* the oldest version still loaded */

#define MXDIFF_KERNEL_OK 0
#define MXDIFF_KERNEL_UNSUPPORTED 1
#define MXDIFF_KERNEL_FAILED 2

/* The split-K plan a kernel ran (version 2): what decides the output's bits besides the transform
 * and the step model (docs/numerics.md, reduction order). */
#define MXDIFF_PLAN_KERNEL_SIZE 64
typedef struct mxdiff_plan {
  int32_t cta_k;  /* the partition's chunk is lcm(32, cta_k) along k */
  int32_t splits; /* the split count that ran, after any clamp */
  /* Optional: which of the library's kernels ran, NUL-terminated, [A-Za-z0-9._-] ("" none); the
   * campaign counts the kernels a module ran by it. */
  char kernel[MXDIFF_PLAN_KERNEL_SIZE];
} mxdiff_plan;

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
  mxdiff_plan* ran_plan; /* version 2: never null; pre-filled with the requested plan */
} mxdiff_problem;

typedef struct mxdiff_kernel {
  uint32_t abi_version; /* MXDIFF_KERNEL_ABI_VERSION, or 1 for a kernel that reports no plan */
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
