// The device reference's kernels: one thread per output element (or per step chain) running
// reference_element.h, which holds the plain K loop in the split plan's order over the oracle's
// own host/device headers.
#include "reference/device/device_launch.h"

namespace mxdiff::device_internal {
namespace {

constexpr int kThreads = 128;

__global__ void ReferenceGemmKernel(GemmArgs args) {
  const int64_t index = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= int64_t(args.rows) * args.n) return;
  args.output[index] = ReferenceElement(args, index);
}

__global__ void ChainStepsKernel(int model, int rows, int k, const uint32_t* c, const uint16_t* a,
                                 const uint16_t* b, uint32_t* d) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  d[row] = ChainElement(model, k, c, a, b, row);
}

unsigned Blocks(int64_t threads) { return unsigned((threads + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t LaunchReferenceGemm(const GemmArgs& args) {
  const int64_t outputs = int64_t(args.rows) * args.n;
  if (outputs == 0) return cudaSuccess;
  ReferenceGemmKernel<<<Blocks(outputs), kThreads>>>(args);
  return cudaGetLastError();
}

cudaError_t LaunchChainSteps(int model, int rows, int k, const uint32_t* c, const uint16_t* a, const uint16_t* b,
                             uint32_t* d) {
  if (rows == 0) return cudaSuccess;
  ChainStepsKernel<<<Blocks(rows), kThreads>>>(model, rows, k, c, a, b, d);
  return cudaGetLastError();
}

}  // namespace mxdiff::device_internal
