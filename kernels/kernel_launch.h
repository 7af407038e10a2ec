// One launch of a grouped GEMM instantiation on device pointers: plain data, CUDA-free, shared
// by the host-side checks (launch_plan.h) and the instantiations (kernel_instantiations.h).
//
// Split-K workspace (only when the effective split count is > 1), two separate buffers: one int
// semaphore per output tile, zero when the launch starts (a completed launch leaves them zero
// again), and tiles x splits x cta_m x cta_n fp32 partials (splitk_epilogue.cuh). Separate so
// that a later launch with more tiles never reads an earlier launch's partials as semaphores.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tile_routing.h"
#include "reference/transform.h"

namespace mxdiff {

inline constexpr size_t kPartialsAlign = 16;

// Where a launch's activation rows come from (grouped_gemm_kernel.cuh): row r of the matrix; row
// row_source[r] (gathered); or gathered through a schedule each CTA computes from the routing
// (tile_routing).
enum class ActivationRows { kPlain, kGathered, kRouted };

struct KernelLaunch {
  Transform transform = Transform::kOrdinary;
  int shape_index = 0;  // into kCtaShapes
  int splits = 1;       // effective (already clamped by split_plan.h)
  int swizzle = 0;
  int groups = 0;
  int n = 0;
  int k = 0;
  int m_tiles = 0;
  int n_tiles = 0;
  const int32_t* row_offsets = nullptr;  // device, groups + 1
  // Optional (capacity launches for CUDA Graph replay, kernels/tile_map.h): device, m_tiles
  // entries of four int32 {group, row_begin, row_end, 0} written on the device for the routing of
  // the moment; the kernel reads its tile there instead of scanning row_offsets, and a CTA whose
  // entry has group -1 (beyond this routing's rows) does nothing. Null: m_tiles is exact.
  const int32_t* tile_map = nullptr;
  const uint16_t* activations = nullptr;  // device, M x K fp16 bits
  // Optional (the MoE layer's W13): activation row r is row row_source[r] of `activations`, so
  // the rows are read in expert order without a gathered copy. Null: row r is row r.
  const int32_t* row_source = nullptr;
  // Optional (the MoE layer's W13 at decode batch sizes, tile_routing.h): each CTA finds its tile
  // and its rows' tokens from the routing itself; tile_map and row_source are not read.
  // Enabled where expert_ids is set.
  TileRouting tile_routing = {};
  // Optional, with row_source or tile_routing (the MoE layer's stage checks): the CTAs of N tile
  // 0 also write the activation values they multiply, row r at record + r * k: the gathered rows.
  uint16_t* record = nullptr;
  const uint8_t* codes = nullptr;         // device, groups x N x K/2
  const uint16_t* scales = nullptr;       // device, groups x N x K/32 prepared fp16 scale bits
  uint16_t* output = nullptr;             // device, M x N fp16 bits
  int* semaphores = nullptr;  // device, zeroed
  size_t semaphore_count = 0;
  float* partials = nullptr;  // device
  size_t partial_bytes = 0;
  void* stream = nullptr;  // cudaStream_t
  bool dependent = false;  // a programmatic dependent launch (kernels/dependent_launch.cuh), sm_90+
};

}  // namespace mxdiff
