// The end of a CTA: split-K partials reduced in split order 0, 1, ..., S-1 with fp32 adds
// (the reference's ReduceAdd(partial_sum, partial): sum = p0, then sum = sum + p1, ...), then
// fp32 -> fp16 (nearest even, canonical NaN, the rule of reference/fp16.h) and a predicated
// store of the tile's valid rows and columns.
//
// Every split stores its partial in its own workspace slot and then takes a ticket from the
// tile's semaphore (atomic add, acquire/release). The CTA that takes the last ticket performs
// the whole serial reduction in split order from the slots and stores the tile; it also resets
// the semaphore to 0 for the next launch. The sum is the same sequence of fp32 adds as a chain
// of splits handing the running sum from one to the next, so the bits depend on the split
// partition alone (FACTS.md §6), but no split ever waits for another: the chain's S global
// round trips become one, which is what makes many splits affordable.
#pragma once

#include <cstdint>

#include "kernels/mma_m8n8k4.cuh"
#include "reference/fp16.h"

namespace mxdiff {

__device__ __forceinline__ int TakeTicket(int* semaphore) {
  int ticket;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(ticket) : "l"(semaphore) : "memory");
  return ticket;
}

template <int kCtaM, int kCtaN>
struct SplitKEpilogue {
  static constexpr int kRowBlocks = kCtaM / 8;
  static constexpr int kThreads = 128;
  static constexpr int kTileFloats = kCtaM * kCtaN;

  // `partials`: this tile's `splits` slots of kTileFloats. Each thread keeps its accumulators
  // at fixed slot positions, so the loads of the reducing CTA are coalesced. Returns true in
  // the one CTA that holds the reduced tile in `acc` and must store it.
  __device__ __forceinline__ static bool Reduce(float (&acc)[kRowBlocks][8], float* partials, int* semaphore,
                                                int split, int splits) {
    __shared__ int is_last;
    float* mine = partials + size_t(split) * kTileFloats;
#pragma unroll
    for (int block = 0; block < kRowBlocks; ++block) {
#pragma unroll
      for (int i = 0; i < 8; ++i) __stcg(mine + (block * 8 + i) * kThreads + threadIdx.x, acc[block][i]);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      is_last = TakeTicket(semaphore) == splits - 1;
      if (is_last) atomicExch(semaphore, 0);
    }
    __syncthreads();
    if (!is_last) return false;
    __threadfence();
#pragma unroll
    for (int block = 0; block < kRowBlocks; ++block) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int slot = (block * 8 + i) * kThreads + threadIdx.x;
        float sum = split == 0 ? acc[block][i] : __ldcg(partials + slot);
        for (int s = 1; s < splits; ++s) {
          const float partial = s == split ? acc[block][i] : __ldcg(partials + size_t(s) * kTileFloats + slot);
          sum = __fadd_rn(sum, partial);
        }
        acc[block][i] = sum;
      }
    }
    return true;
  }

  __device__ __forceinline__ static void Store(const float (&acc)[kRowBlocks][8], uint16_t* output, int n,
                                               int row_begin, int row_end, int column_begin) {
    const int lane = threadIdx.x & 31;
    const int warp_column = column_begin + (threadIdx.x >> 5) * 32 + QuadPair(lane) * 8;
#pragma unroll
    for (int block = 0; block < kRowBlocks; ++block) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int row = row_begin + block * 8 + AccumulatorRow(lane, i);
        const int column = warp_column + AccumulatorColumn(lane, i);
        if (row < row_end && column < n) output[size_t(row) * n + column] = f32_to_f16_rne(acc[block][i]);
      }
    }
  }
};

}  // namespace mxdiff
