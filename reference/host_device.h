// Marks functions that both the host compiler and nvcc compile from one definition.
#pragma once

#if defined(__CUDACC__)
#define MXDIFF_HD __host__ __device__ __forceinline__
#else
#define MXDIFF_HD inline
#endif
