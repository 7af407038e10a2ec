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
// partition alone (docs/numerics.md: reduction order), but no split ever waits for another: the chain's S global
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

  // Splits whose loads the reducing loop keeps in flight: 32 registers of partials at most.
  static constexpr int kSplitsInFlight = kRowBlocks >= 4 ? 1 : 4 / kRowBlocks;

  __device__ __forceinline__ static void LoadSlot(const float* partials, int s, float (&out)[kRowBlocks][8]) {
    const float4* slot =
        reinterpret_cast<const float4*>(partials + size_t(s) * kTileFloats) + threadIdx.x * 2 * kRowBlocks;
#pragma unroll
    for (int block = 0; block < kRowBlocks; ++block) {
      const float4 low = __ldcg(slot + 2 * block);
      const float4 high = __ldcg(slot + 2 * block + 1);
      out[block][0] = low.x, out[block][1] = low.y, out[block][2] = low.z, out[block][3] = low.w;
      out[block][4] = high.x, out[block][5] = high.y, out[block][6] = high.z, out[block][7] = high.w;
    }
  }

  // `partials`: this tile's `splits` slots of kTileFloats. In a slot each thread's accumulators
  // are contiguous (float4 stores and loads, coalesced across threads). The reducing CTA walks
  // the splits in order with every accumulator of the split loaded at once, so a split costs one
  // round trip to L2 for all of them rather than one per accumulator.
  __device__ __forceinline__ static bool Reduce(float (&acc)[kRowBlocks][8], float* partials, int* semaphore,
                                                int split, int splits) {
    static_assert(kTileFloats == kThreads * kRowBlocks * 8);
    __shared__ int is_last;
    float4* mine =
        reinterpret_cast<float4*>(partials + size_t(split) * kTileFloats) + threadIdx.x * 2 * kRowBlocks;
#pragma unroll
    for (int block = 0; block < kRowBlocks; ++block) {
      __stcg(mine + 2 * block, make_float4(acc[block][0], acc[block][1], acc[block][2], acc[block][3]));
      __stcg(mine + 2 * block + 1, make_float4(acc[block][4], acc[block][5], acc[block][6], acc[block][7]));
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
    // sum = p0, then sum = sum + p1, ..., in split order for every accumulator (docs/numerics.md: reduction order). This
    // CTA's own slot is read back too (the same bits as acc), which keeps the loop branch-free so
    // the loads of the next splits are in flight during the adds.
    float sum[kRowBlocks][8];
    LoadSlot(partials, 0, sum);
#pragma unroll(kSplitsInFlight)
    for (int s = 1; s < splits; ++s) {
      float partial[kRowBlocks][8];
      LoadSlot(partials, s, partial);
#pragma unroll
      for (int block = 0; block < kRowBlocks; ++block) {
#pragma unroll
        for (int i = 0; i < 8; ++i) sum[block][i] = __fadd_rn(sum[block][i], partial[block][i]);
      }
    }
#pragma unroll
    for (int block = 0; block < kRowBlocks; ++block) {
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[block][i] = sum[block][i];
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
