// The MoE decode layer on the device, captured once into a CUDA graph and replayed with new
// inputs (kernels/README.md, "The MoE layer"). CUDA-free header; built only where CUDA is
// available. Per replay, all on the device:
//
//   route+gather   the routing (expert ids, weights) -> expert-order schedule (row offsets, the
//                  token of each row, the row of each (token, slot), both GEMMs' tile maps) and
//                  the token rows copied into expert order; the routing is checked here: an
//                  expert id out of range or a routing needing more M tiles than the graph has
//                  makes every later stage do nothing, and Replay reports it
//   W13            grouped GEMM, groups = routed experts + shared expert, N = 2 x intermediate
//   SwiGLU         reference/swiglu.h, fp16 in and out
//   W2             grouped GEMM, N = hidden
//   combine        reference/moe_layer_combine.h, per token in the fixed slot order
//
// With MoeLayerConfig::gather_in_w13 (the default) the gather rides on W13: the routing kernel
// only schedules (one CTA), and W13 reads each row straight from its token's activations through
// the schedule and records the rows it read in the gathered-rows buffer, which holds the same
// bits either way. With MoeLayerConfig::route_in_w13 too (the default), at decode batch sizes
// (max_tokens x top_k <= kMaxSelfRoutedEntries, kernels/tile_routing.h) W13's CTAs also find
// their own tiles and rows from the expert ids, so W13 no longer waits for the routing kernel,
// which still writes the schedule for the later stages and runs alongside.
//
// The GEMMs are capacity launches (launch_plan.h): their grids are sized when the graph is
// captured for the worst routing of `max_tokens` tokens (or a smaller capacity the caller
// chooses), their CTAs read their tiles from the device tile map and those beyond the routing's
// rows do nothing. Each GEMM is routed by the dispatch of route.h on its own layer's admission
// verdict, decided from the scale bytes whenever they are written. Every stage's bits equal
// ReferenceMoeLayer (reference/moe_layer.h) for the routes that ran.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/admitted_scales.h"
#include "kernels/gemm_runner.h"
#include "kernels/moe_layer_plan.h"
#include "reference/moe_layer.h"

namespace mxdiff {

struct MoeLayerConfig {
  MoeShape shape;
  int max_tokens = 1;  // tokens per replay, 1..kMaxMoeTokens
  // M tiles of each GEMM's grid; 0: MoeWorstMTiles of max_tokens for the tactic's cta_m (no
  // routing can exceed it). A smaller capacity saves CTAs; a routing that needs more is refused.
  int w13_tile_capacity = 0;
  int w2_tile_capacity = 0;
  float swiglu_limit = kSwigluLimit;
  // Fill every stage buffer with 0xFF bytes at the start of each replay (inside the graph), so
  // that an element no kernel wrote reads as fp16 0xFFFF, a NaN no kernel produces (tests).
  bool poison_stages = false;
  // Launch W13, SwiGLU, W2 and combine as programmatic dependent launches where the device has
  // them (sm_90+; kernels/dependent_launch.cuh): each may be scheduled while the one before
  // still runs, which hides four launch latencies per replay. Plain launches where false.
  bool dependent_launch = true;
  // The gather rides on W13 (above); false: the routing kernel copies the rows (a CTA per row).
  bool gather_in_w13 = true;
  // W13 routes itself where the batch allows (above); only with gather_in_w13.
  bool route_in_w13 = true;
  int device = 0;
};

inline constexpr int kMaxMoeTokens = 256;
inline constexpr int kMaxMoeEntries = 4096;  // max_tokens x top_k: the routing kernel's shared memory

// What the routing kernel reported for the last replay.
enum class MoeRoutingVerdict : int32_t {
  kOk = 0,
  kTooManyTokens = 1,
  kInvalidExpert = 2,
  kOverCapacity = 3,
};

struct MoeReplay {
  MoeLayerRoutes routes;
  bool recaptured = false;  // the weights' verdicts changed a route since the last capture
};

// Stage bits read back after a replay. Stage buffers are read whole (max rows), so that a test
// can see that nothing was written beyond the routing's rows.
struct MoeDeviceStages {
  int tokens = 0;
  int rows = 0;
  std::vector<int32_t> row_offsets;  // groups + 1
  std::vector<int32_t> row_token;    // max rows
  std::vector<int32_t> entry_row;    // max_tokens x top_k
  std::vector<int32_t> w13_tile_map;  // w13 capacity x 4
  std::vector<int32_t> w2_tile_map;
  std::vector<uint16_t> gathered;   // max rows x hidden
  std::vector<uint16_t> w13;        // max rows x 2 intermediate
  std::vector<uint16_t> activated;  // max rows x intermediate
  std::vector<uint16_t> w2;         // max rows x hidden
  std::vector<uint16_t> output;     // max_tokens x hidden
};

// Stages of EnqueueStages (benchmarks time parts of the layer).
enum MoeStage : unsigned {
  kMoeStageRoute = 1,  // route (+ gather, unless W13 gathers)
  kMoeStageW13 = 2,
  kMoeStageSwiglu = 4,
  kMoeStageW2 = 8,
  kMoeStageCombine = 16,
  kMoeStageAll = 31,
};

class MoeLayer {
 public:
  virtual ~MoeLayer() = default;

  // Allocates every buffer for `config` on the runner's device; weights start as zero codes
  // and raw scale 127 (admitted). The runner supplies the registry and the default tactics and
  // must outlive the layer.
  static absl::StatusOr<std::unique_ptr<MoeLayer>> Create(GemmRunner& runner, const MoeLayerConfig& config);

  virtual const MoeLayerConfig& config() const = 0;
  virtual int max_rows() const = 0;

  // Writes experts [first_expert, first_expert + n) of one GEMM: codes (n x N x K/2) and raw scale
  // bytes (n x N x K/32) in the layouts of reference/problem.h (the shared expert is group
  // `experts`), the bytes admitted expert by expert (AdmittedScales, per_expert N x K/32) by the
  // caller, once: the layer takes those verdicts and admits nothing again. Prepares the scales
  // (kernels/device_scales.h: the folded ones of admitted experts only); the GEMM's verdict is
  // the combination over all its experts.
  virtual absl::Status WriteWeights(MoeGemm gemm, int first_expert, std::span<const uint8_t> codes,
                                    const AdmittedScales& scales) = 0;
  // The same, admitting the raw bytes here.
  absl::Status WriteWeights(MoeGemm gemm, int first_expert, std::span<const uint8_t> codes,
                            std::span<const uint8_t> scale_bytes) {
    return WriteWeights(gemm, first_expert, codes,
                        AdmittedScales::Admit(scale_bytes, MoeScalesPerExpert(config().shape, gemm)));
  }
  virtual const LayerAdmission& admission(MoeGemm gemm) const = 0;

  // Writes the next replay's inputs into the captured buffers: tokens (0..max_tokens) x hidden
  // fp16 activations, tokens x top_k expert ids and fp32 routing weights. Sizes are checked here
  // (InvalidArgument); expert ids are checked by the routing kernel on the device.
  virtual absl::Status SetInputs(int tokens, std::span<const uint16_t> activations,
                                 std::span<const int32_t> expert_ids, std::span<const float> weights) = 0;

  // Decides both routes for `request` and captures the whole layer into a CUDA graph (replaced
  // if one exists). Fail-closed errors and unlaunchable tactics come back here; nothing runs.
  virtual absl::StatusOr<MoeLayerRoutes> Capture(const MoeLayerRequest& request) = 0;

  // Launches the graph on the inputs and weights written so far and waits for it. Where written
  // weights changed a route since the capture, captures again first (the request stays); a
  // fail-closed request that no longer holds is an error and nothing runs. A routing the routing
  // kernel refused: InvalidArgument (an expert id outside 0..experts-1, named by token and slot,
  // as ScheduleMoeRouting says it) or ResourceExhausted (more M tiles than the graph has); every
  // stage then did nothing and the output keeps its previous bits (poison_stages
  // aside, which fills it before the routing kernel runs).
  virtual absl::StatusOr<MoeReplay> Replay() = 0;

  // The same layer without a graph (the kernels enqueued one by one), for comparison.
  virtual absl::StatusOr<MoeReplay> RunEager() = 0;

  virtual absl::Status ReadStages(MoeDeviceStages& stages) = 0;

  // Enqueues the stages in `mask` on `stream` (a cudaStream_t, possibly capturing) with the
  // routes of the last Capture. No synchronization, no status check (benchmarks).
  virtual absl::Status EnqueueStages(void* stream, unsigned mask) = 0;

  // The capacities in M tiles and the tactics of the last Capture.
  virtual int tile_capacity(MoeGemm gemm) const = 0;

  // A sticky CUDA error becomes a status here (fuzz_layer's health check).
  virtual absl::Status CheckDevice() = 0;
};

}  // namespace mxdiff
