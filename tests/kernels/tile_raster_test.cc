#include "kernels/tile_raster.h"

#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

TEST(TileRasterTest, SwizzleIsABijectionOnTheTiles) {
  for (int m_tiles = 1; m_tiles <= 13; ++m_tiles) {
    for (int n_tiles = 1; n_tiles <= 9; ++n_tiles) {
      for (int swizzle = 0; swizzle <= kMaxSwizzleLog2; ++swizzle) {
        std::set<std::pair<int, int>> seen;
        for (int linear = 0; linear < m_tiles * n_tiles; ++linear) {
          const TileCoord tile = SwizzledTile(linear, m_tiles, n_tiles, swizzle);
          ASSERT_GE(tile.m, 0);
          ASSERT_LT(tile.m, m_tiles);
          ASSERT_GE(tile.n, 0);
          ASSERT_LT(tile.n, n_tiles);
          seen.insert({tile.m, tile.n});
        }
        EXPECT_EQ(seen.size(), size_t(m_tiles * n_tiles)) << m_tiles << "x" << n_tiles << " w" << swizzle;
      }
    }
  }
}

TEST(TileRasterTest, SwizzleZeroIsRowMajorOverNTilesWithinAnMTile) {
  // Stripe width 1: all N tiles of M tile 0, then of M tile 1.
  EXPECT_EQ(SwizzledTile(0, 3, 4, 0).m, 0);
  EXPECT_EQ(SwizzledTile(3, 3, 4, 0).n, 3);
  EXPECT_EQ(SwizzledTile(4, 3, 4, 0).m, 1);
  EXPECT_EQ(SwizzledTile(4, 3, 4, 0).n, 0);
}

TEST(TileRasterTest, GroupTilesCoverEveryRowOnceAndSkipEmptyGroups) {
  const std::vector<int32_t> offsets = {0, 1, 1, 20, 36, 36};  // groups of 1, 0, 19, 16, 0 rows
  for (int cta_m : {8, 16, 32, 64}) {
    std::vector<int> owner(36, -1);
    int tiles = 0;
    for (int g = 0; g < 5; ++g) tiles += (offsets[g + 1] - offsets[g] + cta_m - 1) / cta_m;
    for (int t = 0; t < tiles; ++t) {
      const GroupTile tile = FindGroupTile(offsets.data(), 5, cta_m, t);
      ASSERT_GE(tile.group, 0);
      EXPECT_EQ(tile.row_end, offsets[tile.group + 1]);
      for (int row = tile.row_begin; row < tile.row_end && row < tile.row_begin + cta_m; ++row) {
        EXPECT_EQ(owner[row], -1) << "row " << row << " in two tiles";
        owner[row] = tile.group;
      }
    }
    for (int row = 0; row < 36; ++row) EXPECT_NE(owner[row], -1) << "row " << row << " cta_m " << cta_m;
    EXPECT_EQ(FindGroupTile(offsets.data(), 5, cta_m, tiles).group, -1);
  }
}

}  // namespace
}  // namespace mxdiff
