// One output element (or one step chain) of the device reference, as plain MXDIFF_HD code: the
// kernels in device_reference.cu call these once per thread, and a CPU test
// (tests/reference/device/reference_element_test.cc) runs the very same functions on the host
// against the CPU reference, so their indexing and loop order are checked where no GPU exists.
// CUDA-free.
#pragma once

#include <cstdint>

#include "reference/host_device.h"
#include "reference/split_plan.h"
#include "reference/step_model_hd.h"
#include "reference/transform.h"

namespace mxdiff::device_internal {

struct GemmArgs {
  int groups, n, k, rows;
  int cta_k, requested_splits;
  int transform;  // Transform
  int model;      // StepModel
  const int32_t* row_offsets;   // groups + 1
  const uint16_t* activations;  // rows x k
  const uint8_t* packed_codes;  // groups x n x k / 2
  const uint8_t* scale_bytes;   // groups x n x k / 32
  uint32_t* output;             // rows x n fp32 bits
};

// The group owning row m: the largest g with row_offsets[g] <= m (empty groups before the owner
// share its first row).
MXDIFF_HD int GroupOfRow(const int32_t* row_offsets, int groups, int m) {
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

// Output `index` (row index / n, column index % n): per split of the split plan an accumulator
// from +0, one step per 4 k ascending with weights dequantized on the fly, the splits reduced
// in order.
MXDIFF_HD uint32_t ReferenceElement(const GemmArgs& args, int64_t index) {
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
      // k is a multiple of 4 (so is every split's start), so a step's four weights share a block.
      const uint16_t scale = prepared_scale(transform, scales[k / kBlockK]);
      uint16_t weights[4];
      for (int i = 0; i < 4; ++i) weights[i] = dequantize(transform, unpack_code(codes, k + i), scale);
      acc = hd::Step(model, acc, activations + k, weights);
    }
    reduced = split == 0 ? acc : hd::ReduceAdd(model, reduced, acc);
  }
  return reduced;
}

// Chain `row`: the steps over a[row * k ...], b[row * k ...] from c[row].
MXDIFF_HD uint32_t ChainElement(int model, int k, const uint32_t* c, const uint16_t* a, const uint16_t* b,
                                int64_t row) {
  uint32_t acc = c[row];
  for (int i = 0; i < k; i += 4) acc = hd::Step(StepModel(model), acc, a + row * k + i, b + row * k + i);
  return acc;
}

}  // namespace mxdiff::device_internal
