// The k loop of one CTA over one split's k range: activations staged through a two-stage
// shared-memory ring (register-staged: the next tile's global loads are in flight while the
// current tile is multiplied), weights prefetched one tile ahead straight into registers.
// Weights skip shared memory because each weight has exactly one consumer lane: the lane that
// owns its column dequantizes it once and reuses it for all cta_m / 8 row blocks.
//
// Order (docs/numerics.md: reduction order): the accumulator starts at +0 and takes four k per m8n8k4 step in
// ascending k over the whole range; nothing else ever touches it.
#pragma once

#include <cstdint>

#include "kernels/mma_m8n8k4.cuh"
#include "reference/transform.h"

namespace mxdiff {

template <int kCtaM, int kCtaN, int kCtaK>
struct MainloopShape {
  static constexpr int kThreads = 128;
  static constexpr int kRowBlocks = kCtaM / 8;          // m8n8k4 instructions per k step
  static constexpr int kSmemStride = kCtaK + 4;         // halves; the pad spreads 8 rows over banks
  static constexpr int kChunksPerRow = kCtaK / 4;       // 8-byte activation chunks
  static constexpr int kChunksPerThread = kCtaM * kChunksPerRow / kThreads;
  static constexpr int kCodeVectors = kCtaK / 32;       // 16-byte code loads (one scale block each)
  static_assert(kCtaN == 128, "four warps of four quad-pairs of eight columns");
  static_assert(kCtaM % 8 == 0 && kCtaK % 32 == 0);
  static_assert(kCtaM * kChunksPerRow % kThreads == 0);
};

struct WeightTile {
  uint4 codes[2];      // up to 64 k of this lane's column
  uint16_t scales[2];  // prepared fp16 scale bits, one per 32 k
};

template <int kCtaM, int kCtaN, int kCtaK, Transform kTransform>
struct Mainloop {
  using Shape = MainloopShape<kCtaM, kCtaN, kCtaK>;
  struct SharedStorage {
    alignas(16) uint16_t activations[2][kCtaM][Shape::kSmemStride];
  };

  // Global loads of one activation tile into registers; chunks of rows outside the group
  // (source row -1) and k outside the range are zero (their products only reach outputs that
  // are never stored).
  __device__ __forceinline__ static void LoadActivations(uint2 (&staged)[Shape::kChunksPerThread],
                                                         const uint16_t* activations, int k,
                                                         const int (&source)[Shape::kChunksPerThread], int k0,
                                                         int k_end) {
#pragma unroll
    for (int c = 0; c < Shape::kChunksPerThread; ++c) {
      const int chunk = threadIdx.x + c * Shape::kThreads;
      const int kk = k0 + (chunk % Shape::kChunksPerRow) * 4;
      staged[c] = (source[c] >= 0 && kk < k_end)
                      ? __ldg(reinterpret_cast<const uint2*>(activations + size_t(source[c]) * k + kk))
                      : make_uint2(0, 0);
    }
  }

  // The staged values of valid chunks, row r (of the tile's rows) at record + r * k.
  __device__ __forceinline__ static void RecordActivations(uint16_t* record, int k, int row_begin,
                                                           const int (&source)[Shape::kChunksPerThread], int k0,
                                                           int k_end, const uint2 (&staged)[Shape::kChunksPerThread]) {
#pragma unroll
    for (int c = 0; c < Shape::kChunksPerThread; ++c) {
      const int chunk = threadIdx.x + c * Shape::kThreads;
      const int kk = k0 + (chunk % Shape::kChunksPerRow) * 4;
      if (source[c] >= 0 && kk < k_end) {
        *reinterpret_cast<uint2*>(record + size_t(row_begin + chunk / Shape::kChunksPerRow) * k + kk) = staged[c];
      }
    }
  }

  __device__ __forceinline__ static void StoreActivations(SharedStorage& smem, int stage,
                                                          const uint2 (&staged)[Shape::kChunksPerThread]) {
#pragma unroll
    for (int c = 0; c < Shape::kChunksPerThread; ++c) {
      const int chunk = threadIdx.x + c * Shape::kThreads;
      *reinterpret_cast<uint2*>(&smem.activations[stage][chunk / Shape::kChunksPerRow]
                                                 [(chunk % Shape::kChunksPerRow) * 4]) = staged[c];
    }
  }

  __device__ __forceinline__ static void LoadWeights(WeightTile& tile, const uint8_t* code_row,
                                                     const uint16_t* scale_row, bool column_valid, int k0,
                                                     int k_end) {
#pragma unroll
    for (int v = 0; v < Shape::kCodeVectors; ++v) {
      const int kk = k0 + v * kBlockK;
      const bool valid = column_valid && kk < k_end;
      tile.codes[v] = valid ? __ldg(reinterpret_cast<const uint4*>(code_row + kk / 2)) : make_uint4(0, 0, 0, 0);
      tile.scales[v] = valid ? __ldg(scale_row + kk / kBlockK) : uint16_t(0);
    }
  }

  // One k tile: `steps` m8n8k4 steps (all of them, or 32 k of a 64-wide tile at the range's end).
  __device__ __forceinline__ static void Multiply(float (&acc)[Shape::kRowBlocks][8], const SharedStorage& smem,
                                                  int stage, const WeightTile& tile, int tile_k) {
    const int lane = threadIdx.x & 31;
    const int fragment_row = FragmentIndex(lane);
#pragma unroll
    for (int v = 0; v < Shape::kCodeVectors; ++v) {
      if (v * kBlockK >= tile_k) break;
      const uint32_t words[4] = {tile.codes[v].x, tile.codes[v].y, tile.codes[v].z, tile.codes[v].w};
#pragma unroll
      for (int word = 0; word < 4; ++word) {
        uint32_t pairs[4];  // k = 8 word + 2 j (low half) and + 1 (high half)
        dequantize_word(kTransform, words[word], tile.scales[v], pairs);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int kk = v * kBlockK + word * 8 + half * 4;
#pragma unroll
          for (int block = 0; block < Shape::kRowBlocks; ++block) {
            const uint2 a =
                *reinterpret_cast<const uint2*>(&smem.activations[stage][block * 8 + fragment_row][kk]);
            MmaM8N8K4(acc[block], a.x, a.y, pairs[2 * half], pairs[2 * half + 1]);
          }
        }
      }
    }
  }

  // Accumulates k in [k_begin, k_end) of rows [row_begin, row_end) into acc (which the caller
  // zeroed). Row r is row row_source[r - row_begin] of `activations` where row_source is given
  // (a gather without a gathered copy, from global or shared memory; each thread's chunks keep
  // their rows, so each looks its row up once); where `record` is given, the values read are
  // written there too (row r at record + r * k). The plain kernel passes both as null constants:
  // no trace of either.
  __device__ __forceinline__ static void Run(float (&acc)[Shape::kRowBlocks][8], SharedStorage& smem,
                                             const uint16_t* activations, const int32_t* row_source,
                                             uint16_t* record, int k, int row_begin, int row_end,
                                             const uint8_t* code_row, const uint16_t* scale_row,
                                             bool column_valid, int k_begin, int k_end) {
    int source[Shape::kChunksPerThread];
#pragma unroll
    for (int c = 0; c < Shape::kChunksPerThread; ++c) {
      const int row = row_begin + (int(threadIdx.x) + c * Shape::kThreads) / Shape::kChunksPerRow;
      source[c] = row >= row_end ? -1 : (row_source != nullptr ? row_source[row - row_begin] : row);
    }
    uint2 staged[Shape::kChunksPerThread];
    WeightTile next;
    LoadActivations(staged, activations, k, source, k_begin, k_end);
    LoadWeights(next, code_row, scale_row, column_valid, k_begin, k_end);
    StoreActivations(smem, 0, staged);
    if (record != nullptr) RecordActivations(record, k, row_begin, source, k_begin, k_end, staged);
    __syncthreads();
    int stage = 0;
    for (int k0 = k_begin; k0 < k_end; k0 += kCtaK) {
      const WeightTile current = next;
      const int k_next = k0 + kCtaK;
      const bool more = k_next < k_end;
      if (more) {
        LoadActivations(staged, activations, k, source, k_next, k_end);
        LoadWeights(next, code_row, scale_row, column_valid, k_next, k_end);
      }
      Multiply(acc, smem, stage, current, k_end - k0 < kCtaK ? k_end - k0 : kCtaK);
      if (more) {
        StoreActivations(smem, stage ^ 1, staged);
        if (record != nullptr) RecordActivations(record, k, row_begin, source, k_next, k_end, staged);
      }
      __syncthreads();
      stage ^= 1;
    }
  }
};

}  // namespace mxdiff
