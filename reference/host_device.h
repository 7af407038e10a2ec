// Marks functions that both the host compiler and nvcc compile from one definition. Always
// inlined on both sides: on the host each caller gets its own copy, built with its own file's
// flags, so the oracle's uninstrumented inner loops (reference/CMakeLists.txt) never call an
// instrumented copy that the linker happened to keep.
#pragma once

#if defined(__CUDACC__)
#define MXDIFF_HD __host__ __device__ __forceinline__
#else
#define MXDIFF_HD inline __attribute__((always_inline))
#endif
