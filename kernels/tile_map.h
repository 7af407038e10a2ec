// The device tile map of a capacity launch (kernel_launch.h): one entry of four int32 per M tile
// of the grid, {group, row_begin, row_end, 0}, in FindGroupTile's enumeration (groups in order,
// each group's rows cut from its first row into cta_m tiles), then {-1, 0, 0, 0} for every tile
// of the grid beyond the routing's tiles. The MoE routing kernel (moe_layer_kernels.cu) writes it
// on the device for the routing of the moment, so a CUDA graph captured once serves every
// routing: a CTA reads its tile in one 16-byte load instead of scanning all groups' row offsets
// (257 groups in a DeepSeek V4 layer), and a CTA whose entry says -1 does nothing. Without a map
// the kernel scans the device row offsets and reaches the same tiles and the same -1.
#pragma once

#include <cstdint>

#include "kernels/tile_raster.h"
#include "reference/host_device.h"

namespace mxdiff {

inline constexpr int kTileMapInts = 4;

MXDIFF_HD GroupTile MappedGroupTile(const int32_t* tile_map, int m_tile) {
#if defined(__CUDA_ARCH__)
  const int4 entry = __ldg(reinterpret_cast<const int4*>(tile_map) + m_tile);
  return GroupTile{entry.x, entry.y, entry.z};
#else
  const int32_t* entry = tile_map + kTileMapInts * m_tile;
  return GroupTile{entry[0], entry[1], entry[2]};
#endif
}

// ceil(rows / cta_m): the M tiles of one group.
MXDIFF_HD int GroupMTiles(int rows, int cta_m) { return (rows + cta_m - 1) / cta_m; }

}  // namespace mxdiff
