// The device side of TileRouting (tile_routing.h): one CTA of 128 threads schedules the
// routing's entries (one thread each) and finds its own M tile. The rules are the routing
// kernel's (moe_layer_kernels.cu) and ScheduleMoeRouting's: groups in ascending order, the
// shared expert last with one row per token; a routed group's rows in ascending (token, slot)
// order; each group cut into cta_m-row tiles from its first row. A refused routing (token count
// outside 0..max_tokens, an expert id outside 0..experts-1, more M tiles than either GEMM's grid)
// gives every CTA an empty tile, as the routing kernel's empty tile map does.
#pragma once

#include <cstdint>

#include "kernels/tile_map.h"
#include "kernels/tile_routing.h"
#include "kernels/tile_raster.h"

namespace mxdiff {

// The tile of M tile `m_tile` of a grid of `capacity` M tiles; `*rows_out` points to the token of
// each of its rows (kCtaM entries in shared memory, tile-relative). Every thread of the CTA calls it.
template <int kCtaM>
__device__ __forceinline__ GroupTile RouteOwnTile(const TileRouting& r, int m_tile, int capacity,
                                                  const int32_t** rows_out) {
  __shared__ int32_t row_token[kCtaM];
  *rows_out = row_token;
  __shared__ int32_t ids[kMaxSelfRoutedEntries];
  __shared__ int32_t group_tiles[kMaxSelfRoutedEntries];  // this GEMM's, at a group's first entry, else 0
  __shared__ int routed_tiles[2], bad_id;
  __shared__ int4 found;  // group, row_begin, row_end
  const int t = int(threadIdx.x);
  const int max_entries = r.max_tokens * r.top_k;
  const int tokens = __ldg(r.tokens);
  if (t < max_entries) ids[t] = __ldg(r.expert_ids + t);
  if (t < 2) routed_tiles[t] = 0;
  if (t == 0) {
    bad_id = 0;
    found = make_int4(-1, 0, 0, 0);
  }
  __syncthreads();
  const bool tokens_ok = tokens >= 0 && tokens <= r.max_tokens;
  const int entries = tokens_ok ? tokens * r.top_k : 0;
  // This entry's expert, its rank among that expert's entries, the expert's rows, and the first
  // row of the expert's group (every entry of a lower expert comes first).
  int id = -1, rank = 0, rows = 0, begin_row = 0;
  if (t < entries) {
    id = ids[t];
    if (id < 0 || id >= r.experts) {
      bad_id = 1;
    } else {
      for (int j = 0; j < entries; ++j) {
        const int other = ids[j];
        rank += other == id && j < t ? 1 : 0;
        rows += other == id ? 1 : 0;
        begin_row += other < id ? 1 : 0;
      }
    }
  }
  const bool first = t < entries && id >= 0 && id < r.experts && rank == 0;
  const int tiles = first ? GroupMTiles(rows, kCtaM) : 0;
  const int other_tiles = first ? GroupMTiles(rows, r.other_cta_m) : 0;
  if (t < kMaxSelfRoutedEntries) group_tiles[t] = tiles;
  if (tiles > 0) {
    atomicAdd(&routed_tiles[0], tiles);
    atomicAdd(&routed_tiles[1], other_tiles);
  }
  __syncthreads();
  const int shared_rows = r.shared_expert ? tokens : 0;
  const int needed = routed_tiles[0] + GroupMTiles(shared_rows, kCtaM);
  const int other_needed = routed_tiles[1] + GroupMTiles(shared_rows, r.other_cta_m);
  if (!tokens_ok || bad_id || needed > capacity || other_needed > r.other_capacity || m_tile >= needed) {
    return GroupTile{-1, 0, 0};
  }
  if (first) {
    int begin_tile = 0;  // the tiles of every lower expert's group
    for (int j = 0; j < entries; ++j) begin_tile += ids[j] < id ? group_tiles[j] : 0;
    if (m_tile >= begin_tile && m_tile < begin_tile + tiles) {
      found = make_int4(id, begin_row + (m_tile - begin_tile) * kCtaM, begin_row + rows, 0);
    }
  }
  if (t == 0 && m_tile >= routed_tiles[0]) {  // the shared expert's group, after every routed row
    found = make_int4(r.experts, entries + (m_tile - routed_tiles[0]) * kCtaM, entries + tokens, 0);
  }
  __syncthreads();
  const GroupTile tile{found.x, found.y, found.z};
  if (tile.group == r.experts) {
    if (t < tile.row_end - tile.row_begin && t < kCtaM) row_token[t] = tile.row_begin + t - entries;
  } else if (id == tile.group) {
    const int row = begin_row + rank;
    if (row >= tile.row_begin && row < tile.row_end) row_token[row - tile.row_begin] = t / r.top_k;
  }
  __syncthreads();
  return tile;
}

}  // namespace mxdiff
