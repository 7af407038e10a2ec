#include "fuzz/checks/layer_compare.h"

#include <span>

#include "fmt/core.h"
#include "kernels/moe_layer_plan.h"
#include "kernels/output_poison.h"
#include "kernels/tile_map.h"
#include "kernels/tile_raster.h"

namespace mxdiff::fuzz {
namespace {

template <typename T>
StageDifference FirstDifference(const char* stage, std::span<const T> expected, std::span<const T> got, size_t width) {
  if (got.size() < expected.size()) {
    return {stage, fmt::format("{} elements read back, {} expected", got.size(), expected.size())};
  }
  size_t count = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == got[i]) continue;
    if (count++ == 0) first = i;
  }
  if (count == 0) return {};
  return {stage, fmt::format("{} of {} elements differ, first [{}][{}]: expected 0x{:x}, got 0x{:x}", count,
                             expected.size(), first / width, first % width, uint32_t(expected[first]),
                             uint32_t(got[first]))};
}

// No kernel writes the runner's poison (every NaN it makes is 0x7FFF): it must survive beyond the rows.
StageDifference PoisonBeyond(const char* stage, std::span<const uint16_t> buffer, size_t written) {
  for (size_t i = written; i < buffer.size(); ++i) {
    if (buffer[i] != kRunnerOutputPoison) {
      return {stage, fmt::format("element {} beyond the routing's {} was written (0x{:04x})", i, written, buffer[i])};
    }
  }
  return {};
}

StageDifference CompareTileMap(const char* stage, const MoeLayerStages& expected, std::span<const int32_t> map,
                               int groups, int cta_m) {
  const int needed = MoeMTiles(expected.schedule.row_offsets, cta_m);
  const int capacity = int(map.size() / kTileMapInts);
  for (int m = 0; m < capacity; ++m) {
    const GroupTile want =
        m < needed ? FindGroupTile(expected.schedule.row_offsets.data(), groups, cta_m, m) : GroupTile{-1, 0, 0};
    const GroupTile got = MappedGroupTile(map.data(), m);
    if (got.group != want.group ||
        (want.group >= 0 && (got.row_begin != want.row_begin || got.row_end != want.row_end))) {
      return {stage, fmt::format("tile {} is group {} rows {}..{}, expected group {} rows {}..{}", m, got.group,
                                 got.row_begin, got.row_end, want.group, want.row_begin, want.row_end)};
    }
  }
  return {};
}

}  // namespace

StageDifference CompareMoeStages(const MoeShape& shape, const MoeLayerStages& e, const MoeDeviceStages& d, int tokens,
                                 bool poisoned, int w13_cta_m, int w2_cta_m) {
  const size_t rows = size_t(e.schedule.rows()), hidden = size_t(shape.hidden), inter = size_t(shape.intermediate);
  if (d.rows != int(rows) || d.tokens != tokens) {
    return {"header", fmt::format("{} rows and {} tokens, expected {} and {}", d.rows, d.tokens, rows, tokens)};
  }
  const size_t entries = size_t(tokens) * size_t(shape.top_k);
  if (d.row_token.size() < rows || d.entry_row.size() < entries) {
    return {"schedule", "schedule buffers shorter than the routing"};
  }
  for (const StageDifference& difference :
       {FirstDifference<int32_t>("row-offsets", e.schedule.row_offsets, d.row_offsets, 1),
        FirstDifference<int32_t>("row-tokens", e.schedule.row_token, std::span(d.row_token).first(rows), 1),
        FirstDifference<int32_t>("entry-rows", e.schedule.entry_row, std::span(d.entry_row).first(entries), 1),
        CompareTileMap("W13-tile-map", e, d.w13_tile_map, shape.groups(), w13_cta_m),
        CompareTileMap("W2-tile-map", e, d.w2_tile_map, shape.groups(), w2_cta_m),
        FirstDifference<uint16_t>("gathered", e.gathered, d.gathered, hidden),
        FirstDifference<uint16_t>("W13", e.w13, d.w13, 2 * inter),
        FirstDifference<uint16_t>("SwiGLU", e.activated, d.activated, inter),
        FirstDifference<uint16_t>("W2", e.w2, d.w2, hidden),
        FirstDifference<uint16_t>("output", e.output, d.output, hidden)}) {
    if (!difference.empty()) return difference;
  }
  if (poisoned) {
    for (const StageDifference& difference : {PoisonBeyond("gathered-beyond", d.gathered, rows * hidden),
                                              PoisonBeyond("W13-beyond", d.w13, rows * 2 * inter),
                                              PoisonBeyond("SwiGLU-beyond", d.activated, rows * inter),
                                              PoisonBeyond("W2-beyond", d.w2, rows * hidden),
                                              PoisonBeyond("output-beyond", d.output, size_t(tokens) * hidden)}) {
      if (!difference.empty()) return difference;
    }
  }
  return {};
}

MoeLayerOptions MoeReferenceOptions(const MoeLayerRoutes& routes, float limit, StepModel model) {
  MoeLayerOptions options;
  options.model = model;
  options.w13 = {routes.w13.variant, routes.w13.tactic};
  options.w2 = {routes.w2.variant, routes.w2.tactic};
  options.swiglu_limit = limit;
  return options;
}

}  // namespace mxdiff::fuzz
