// The MoE layer's own kernels around its two GEMMs (moe_layer.h): route (+ gather), SwiGLU and the
// weighted sum. Each reads the routing kernel's header for the rows and tokens of the replay of
// the moment, so a graph captured once serves every routing; after a refused routing the header
// says zero rows and tokens and nothing runs. Launch entry points only; the caller (moe_layer.cc)
// has checked every size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mxdiff {

// Written by the routing kernel every replay, read by the later stages and the host.
struct MoeDeviceHeader {
  int32_t verdict;    // MoeRoutingVerdict (moe_layer.h)
  int32_t tokens;     // this replay's tokens; 0 when refused
  int32_t rows;       // this replay's rows in expert order; 0 when refused
  int32_t detail[5];  // too many tokens: tokens; invalid expert: token, slot, id; over capacity:
                      // W13 M tiles needed, W2 M tiles needed, rows
};

struct MoeRouteArgs {
  int experts = 0;
  int top_k = 0;
  int shared_expert = 0;  // 0 or 1
  int groups = 0;
  int max_tokens = 0;
  int max_rows = 0;
  int hidden = 0;
  const int32_t* tokens = nullptr;      // device scalar: this replay's tokens
  const int32_t* expert_ids = nullptr;  // max_tokens x top_k
  const uint16_t* activations = nullptr;  // max_tokens x hidden
  int cta_m[2] = {8, 8};                // W13, W2
  int capacity[2] = {0, 0};             // M tiles of each GEMM's grid
  int32_t* tile_map[2] = {nullptr, nullptr};  // capacity x 4 ints each (kernels/tile_map.h)
  int32_t* row_offsets = nullptr;       // groups + 1
  int32_t* row_token = nullptr;         // max_rows
  int32_t* entry_row = nullptr;         // max_tokens x top_k
  uint16_t* gathered = nullptr;         // max_rows x hidden; null: no gather (W13 gathers, gather_in_w13)
  MoeDeviceHeader* header = nullptr;
  // Launched right after a W13 that routes itself (tile_routing.h): it reads only the replay's
  // inputs, so it runs alongside W13 and waits for it only at its end, keeping the chain's order.
  bool after_w13 = false;
};

// Grid: with a gather, max_rows CTAs (at least one), each computing the whole schedule in shared
// memory and copying its own row; without, one CTA. CTA 0 writes the schedule, the tile maps and
// the header.
cudaError_t LaunchMoeRoute(const MoeRouteArgs& args, cudaStream_t stream, bool dependent);
// The routing kernel's threads and dynamic shared memory for these sizes.
int MoeRouteThreads(int groups);
size_t MoeRouteSharedBytes(int groups, int max_tokens, int top_k, int max_rows);
// Allows the routing kernel that much dynamic shared memory; once, outside any graph capture.
cudaError_t ConfigureMoeRoute(size_t shared_bytes);

struct MoeSwigluArgs {
  const MoeDeviceHeader* header = nullptr;
  const uint16_t* w13 = nullptr;  // max_rows x 2 intermediate
  uint16_t* activated = nullptr;  // max_rows x intermediate
  int intermediate = 0;
  int max_rows = 0;
  float limit = 0;
};
// `dependent`: a programmatic dependent launch (kernels/dependent_launch.cuh; sm_90 and later).
cudaError_t LaunchMoeSwiglu(const MoeSwigluArgs& args, cudaStream_t stream, bool dependent);

struct MoeCombineArgs {
  const MoeDeviceHeader* header = nullptr;
  const int32_t* row_offsets = nullptr;
  const int32_t* entry_row = nullptr;
  const float* weights = nullptr;  // max_tokens x top_k
  const uint16_t* w2 = nullptr;    // max_rows x hidden
  uint16_t* output = nullptr;      // max_tokens x hidden
  int experts = 0;
  int top_k = 0;
  int shared_expert = 0;
  int hidden = 0;
  int max_tokens = 0;
};
cudaError_t LaunchMoeCombine(const MoeCombineArgs& args, cudaStream_t stream, bool dependent);

}  // namespace mxdiff
