// The grouped MXFP4 x FP16 -> FP16 kernel: one CTA computes one (M tile, N tile, split).
// Block index = split x tiles + tile. kRows (kernel_launch.h): gathered or routed, the CTAs of N
// tile 0 also record what they read (KernelLaunch::record); the plain kernel has neither.
#pragma once

#include <cstdint>

#include "kernels/dependent_launch.cuh"
#include "kernels/kernel_launch.h"
#include "kernels/mainloop.cuh"
#include "kernels/splitk_epilogue.cuh"
#include "kernels/tile_map.h"
#include "kernels/tile_raster.h"
#include "kernels/tile_routing.cuh"
#include "reference/split_plan.h"

namespace mxdiff {

template <int kCtaM, int kCtaN, int kCtaK, Transform kTransform, ActivationRows kRows>
__global__ void __launch_bounds__(128) GroupedGemmKernel(KernelLaunch p) {
  using Loop = Mainloop<kCtaM, kCtaN, kCtaK, kTransform>;
  using Epilogue = SplitKEpilogue<kCtaM, kCtaN>;
  __shared__ typename Loop::SharedStorage smem;

  // The tile map and the activations may come from the kernel before (the MoE layer's chain). A
  // routed launch reads only what was there before the chain began, so it waits at its end.
  constexpr bool kRouted = kRows == ActivationRows::kRouted;
  const WaitForPrecedingKernelAtExit wait_at_exit{kRouted};
  if constexpr (!kRouted) WaitForPrecedingKernel();
  LetDependentsStart();
  const int tiles = p.m_tiles * p.n_tiles;
  const int tile = blockIdx.x % tiles;
  const int split = blockIdx.x / tiles;
  const TileCoord coord = SwizzledTile(tile, p.m_tiles, p.n_tiles, p.swizzle);
  const int32_t* row_source = nullptr;  // tile-relative: the activation row of each of the tile's rows
  GroupTile group_tile;
  if constexpr (kRouted) {
    group_tile = RouteOwnTile<kCtaM>(p.tile_routing, coord.m, p.m_tiles, &row_source);
  } else {
    group_tile = p.tile_map != nullptr ? MappedGroupTile(p.tile_map, coord.m)
                                       : FindGroupTile(p.row_offsets, p.groups, kCtaM, coord.m);
  }
  // A capacity launch is sized for the worst routing: a tile beyond this routing's rows is empty.
  if (group_tile.group < 0) return;
  const KRange range = split_k_range(p.k, kCtaK, p.splits, split);

  const int lane = threadIdx.x & 31;
  const int column_begin = coord.n * kCtaN;
  const int column = column_begin + (threadIdx.x >> 5) * 32 + QuadPair(lane) * 8 + FragmentIndex(lane);
  const bool column_valid = column < p.n;
  const size_t weight_row = size_t(group_tile.group) * p.n + (column_valid ? column : 0);
  const uint8_t* code_row = p.codes + weight_row * (p.k / 2);
  const uint16_t* scale_row = p.scales + weight_row * (p.k / kBlockK);

  float acc[kCtaM / 8][8];
#pragma unroll
  for (int block = 0; block < kCtaM / 8; ++block) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[block][i] = 0.0f;
  }
  if constexpr (kRows == ActivationRows::kGathered) row_source = p.row_source + group_tile.row_begin;
  Loop::Run(acc, smem, p.activations, row_source, kRows != ActivationRows::kPlain && coord.n == 0 ? p.record : nullptr,
            p.k, group_tile.row_begin, group_tile.row_end, code_row, scale_row, column_valid, range.begin, range.end);

  if (p.splits > 1) {
    float* tile_partials = p.partials + size_t(tile) * p.splits * kCtaM * kCtaN;
    if (!Epilogue::Reduce(acc, tile_partials, p.semaphores + tile, split, p.splits)) return;
  }
  Epilogue::Store(acc, p.output, p.n, group_tile.row_begin, group_tile.row_end, column_begin);
}

}  // namespace mxdiff
