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

// One block per chunk of scale bytes: the chunk's count of bytes whose bit is set in `refused`.
__global__ void CountRefusedKernel(const uint8_t* bytes, size_t count, RefusedBytes refused, uint32_t* chunk_refused) {
  const size_t begin = size_t(blockIdx.x) * kAdmissionChunk;
  const size_t end = begin + kAdmissionChunk < count ? begin + kAdmissionChunk : count;
  auto is_refused = [&](unsigned raw) { return unsigned(refused.bits[raw >> 6] >> (raw & 63)) & 1u; };
  unsigned found = 0;
  if (end - begin == kAdmissionChunk && reinterpret_cast<uintptr_t>(bytes) % 16 == 0) {
    const uint4* words = reinterpret_cast<const uint4*>(bytes + begin);
    for (size_t w = threadIdx.x; w < kAdmissionChunk / 16; w += blockDim.x) {
      const uint4 word = words[w];
      for (uint32_t part : {word.x, word.y, word.z, word.w}) {
        for (int shift = 0; shift < 32; shift += 8) found += is_refused((part >> shift) & 0xFF);
      }
    }
  } else {
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) found += is_refused(bytes[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) found += __shfl_down_sync(0xFFFFFFFFu, found, offset);
  __shared__ unsigned per_warp[kThreads / 32];
  if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = found;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned total = 0;
    for (int warp = 0; warp < kThreads / 32; ++warp) total += per_warp[warp];
    chunk_refused[blockIdx.x] = total;
  }
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

cudaError_t LaunchCountRefused(const uint8_t* bytes, size_t count, const RefusedBytes& refused,
                               uint32_t* chunk_refused) {
  if (count == 0) return cudaSuccess;
  CountRefusedKernel<<<unsigned((count + kAdmissionChunk - 1) / kAdmissionChunk), kThreads>>>(bytes, count, refused,
                                                                                            chunk_refused);
  return cudaGetLastError();
}

}  // namespace mxdiff::device_internal
