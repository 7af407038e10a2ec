// Programmatic dependent launch (sm_90 and later): a kernel launched with `dependent` may be
// scheduled while the stream's previous kernel still runs, so a chain of small kernels (the
// MoE layer's five, replayed from a graph) does not pay a launch latency at every edge. Each
// kernel of such a chain calls WaitForPrecedingKernel() before it reads anything an earlier
// kernel wrote (it returns once that kernel has finished and its writes are visible, and at
// once when the kernel was launched plainly) and LetDependentsStart() once it no longer needs
// the SMs to itself. On sm_70 (the V100 these kernels are written for) both compile to nothing
// and the host never asks for a dependent launch (SupportsDependentLaunch).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace mxdiff {

__device__ __forceinline__ void WaitForPrecedingKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void LetDependentsStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits for the preceding kernel when it goes out of scope (where enabled): a kernel that reads
// nothing the kernel before wrote need not wait before its work, but still ends after it, so that
// its own end, which the next kernel waits for, implies the whole chain's before it.
struct WaitForPrecedingKernelAtExit {
  bool enabled;
  __device__ __forceinline__ ~WaitForPrecedingKernelAtExit() {
    if (enabled) WaitForPrecedingKernel();
  }
};

// kernel<<<grid, block, shared_bytes, stream>>>(args...), as a dependent launch when asked.
template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                         bool dependent, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = dependent ? &attribute : nullptr;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace mxdiff
