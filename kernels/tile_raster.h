// Which output tile a CTA computes, shared by the kernel and its CPU tests. The raster swizzle
// walks stripes of 2^swizzle M tiles column by column so neighbouring CTAs share weight columns
// in L2; it is a bijection on the tiles and never changes bits (docs/numerics.md: reduction order).
#pragma once

#include <cstdint>

#include "reference/host_device.h"

namespace mxdiff {

inline constexpr int kMaxSwizzleLog2 = 4;  // the builtin registry refuses a wider swizzle

struct TileCoord {
  int m;  // global M tile (over all groups)
  int n;  // N tile
};

MXDIFF_HD TileCoord SwizzledTile(int linear, int m_tiles, int n_tiles, int swizzle_log2) {
  const int stripe = 1 << swizzle_log2;
  const int stripe_index = linear / (stripe * n_tiles);
  const int rest = linear - stripe_index * stripe * n_tiles;
  const int stripe_begin = stripe_index * stripe;
  const int width = m_tiles - stripe_begin < stripe ? m_tiles - stripe_begin : stripe;
  return TileCoord{stripe_begin + rest % width, rest / width};
}

// The rows of one M tile: tiles never straddle groups, each group's rows are cut from its first row.
struct GroupTile {
  int group;
  int row_begin;  // first activation row of the tile
  int row_end;    // one past the group's last row (the tile may end earlier)
};

MXDIFF_HD GroupTile FindGroupTile(const int32_t* row_offsets, int groups, int cta_m, int m_tile) {
  for (int g = 0; g < groups; ++g) {
    const int rows = row_offsets[g + 1] - row_offsets[g];
    const int tiles = (rows + cta_m - 1) / cta_m;
    if (m_tile < tiles) return GroupTile{g, row_offsets[g] + m_tile * cta_m, row_offsets[g + 1]};
    m_tile -= tiles;
  }
  return GroupTile{-1, 0, 0};
}

}  // namespace mxdiff
