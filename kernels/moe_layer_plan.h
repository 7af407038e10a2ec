// The CUDA-free decisions of the MoE layer (kernels/moe_layer.h): the grid capacity a CUDA graph
// is captured with, the dispatch of its two GEMMs, the layer-wide admission verdict of each GEMM
// built from its experts' verdicts. Host-only and unit-tested without a GPU; fuzz_layer derives
// its expectations from here and from the reference.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/route.h"
#include "reference/admission.h"
#include "reference/moe_layer.h"

namespace mxdiff {

enum class MoeGemm : uint8_t { kW13 = 0, kW2 = 1 };
std::string_view MoeGemmName(MoeGemm gemm);  // "W13", "W2"

// The raw scale bytes of one expert of `gemm`: N x K/32 (W13: 2 intermediate x hidden/32, W2:
// hidden x intermediate/32).
size_t MoeScalesPerExpert(const MoeShape& shape, MoeGemm gemm);

// The most M tiles (cta_m rows each) that any routing of `tokens` tokens can need: with R =
// tokens x top_k routed rows spread over g = min(experts, R) experts, g + (R - g) / cta_m tiles
// (a group of 1 + a cta_m + r rows, 0 <= r < cta_m, needs a + 1), plus the shared expert's
// ceil(tokens / cta_m). Repeated experts within a token cannot exceed it.
int MoeWorstMTiles(const MoeShape& shape, int tokens, int cta_m);

// The M tiles a schedule needs: the sum over groups of ceil(rows / cta_m).
int MoeMTiles(std::span<const int32_t> row_offsets, int cta_m);

// Row offsets of a routing of `tokens` tokens that stands for the layer in the dispatch table
// (GemmRunner::DefaultTactic keys on groups with rows and the largest group): the routed rows one
// per expert over min(experts, tokens x top_k) experts (the rest spread evenly), then the shared
// expert's `tokens` rows. One token of DeepSeek V4: seven groups of one row.
std::vector<int32_t> MoeDispatchRowOffsets(const MoeShape& shape, int tokens);

struct MoeLayerRequest {
  TransformRequest transform = TransformRequest::kAuto;
  FallbackPolicy policy = FallbackPolicy::kFallback;
  std::optional<Tactic> w13_tactic = std::nullopt;  // the ordinary tactics; absent: GemmRunner::DefaultTactic
  std::optional<Tactic> w2_tactic = std::nullopt;
};

struct MoeLayerRoutes {
  Route w13;
  Route w2;
};

// Each GEMM through DecideRoute (route.h) on its own layer's verdict, then CheckLaunchable for
// the kernel that would run. The same request for both; errors name the GEMM ("W13: ...").
absl::StatusOr<MoeLayerRoutes> DecideMoeRoutes(const KernelRegistry& registry, const Tactic& w13_tactic,
                                               const Tactic& w2_tactic, const MoeLayerRequest& request,
                                               const LayerAdmission& w13_admission,
                                               const LayerAdmission& w2_admission);

// The verdict of a whole GEMM layer from its experts' verdicts (each over that expert's
// `scales_per_expert` bytes): admitted when every expert is; refused positions are indices into
// the layer's scale array, as AdmitLayer over the whole array would report them.
LayerAdmission CombineExpertAdmissions(std::span<const LayerAdmission> experts, size_t scales_per_expert,
                                       size_t max_reported = 16);

}  // namespace mxdiff
