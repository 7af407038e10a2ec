// The device reference's kernels: one thread per output element (or per step chain), a plain K
// loop in the split plan's order, the oracle's own host/device headers only.
#include "reference/device/device_launch.h"
#include "reference/split_plan.h"
#include "reference/step_model_hd.h"
#include "reference/transform.h"

namespace mxdiff::device_internal {
namespace {

constexpr int kThreads = 128;

// The group owning row m: the largest g with row_offsets[g] <= m (empty groups before the owner
// share its first row).
__device__ int GroupOfRow(const int32_t* row_offsets, int groups, int m) {
  int low = 0, high = groups - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (row_offsets[middle] <= m) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

__global__ void ReferenceGemmKernel(GemmArgs args) {
  const int64_t index = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= int64_t(args.rows) * args.n) return;
  const int m = int(index / args.n);
  const int column = int(index % args.n);
  const int group = GroupOfRow(args.row_offsets, args.groups, m);
  const Transform transform = Transform(args.transform);
  const StepModel model = StepModel(args.model);
  const size_t weight_row = size_t(group) * size_t(args.n) + size_t(column);
  const uint8_t* codes = args.packed_codes + weight_row * size_t(args.k / 2);
  const uint8_t* scales = args.scale_bytes + weight_row * size_t(args.k / kBlockK);
  const uint16_t* activations = args.activations + size_t(m) * size_t(args.k);

  const int splits = effective_splits(args.k, args.cta_k, args.requested_splits);
  uint32_t reduced = 0;
  for (int split = 0; split < splits; ++split) {
    const KRange range = split_k_range(args.k, args.cta_k, args.requested_splits, split);
    uint32_t acc = 0;  // +0
    for (int k = range.begin; k < range.end; k += 4) {
      uint16_t weights[4];
      for (int i = 0; i < 4; ++i) {
        const uint16_t scale = prepared_scale(transform, scales[(k + i) / kBlockK]);
        weights[i] = dequantize(transform, unpack_code(codes, k + i), scale);
      }
      acc = hd::Step(model, acc, activations + k, weights);
    }
    reduced = split == 0 ? acc : hd::ReduceAdd(model, reduced, acc);
  }
  args.output[index] = reduced;
}

__global__ void ChainStepsKernel(int model, int rows, int k, const uint32_t* c, const uint16_t* a,
                                 const uint16_t* b, uint32_t* d) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  uint32_t acc = c[row];
  for (int i = 0; i < k; i += 4) acc = hd::Step(StepModel(model), acc, a + row * k + i, b + row * k + i);
  d[row] = acc;
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
