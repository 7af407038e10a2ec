#include "kernels/moe_layer_plan.h"

#include <algorithm>

#include "fmt/core.h"
#include "kernels/tile_map.h"

namespace mxdiff {

std::string_view MoeGemmName(MoeGemm gemm) { return gemm == MoeGemm::kW13 ? "W13" : "W2"; }

int MoeWorstMTiles(const MoeShape& shape, int tokens, int cta_m) {
  if (tokens <= 0 || cta_m <= 0) return 0;
  const long long routed = (long long)tokens * shape.top_k;
  const long long groups = std::min<long long>(shape.experts, routed);
  long long tiles = groups + (routed - groups) / cta_m;
  if (shape.shared_expert) tiles += GroupMTiles(tokens, cta_m);
  return int(std::min<long long>(tiles, 1 << 30));
}

int MoeMTiles(std::span<const int32_t> row_offsets, int cta_m) {
  long long tiles = 0;
  for (size_t g = 0; g + 1 < row_offsets.size(); ++g) tiles += GroupMTiles(row_offsets[g + 1] - row_offsets[g], cta_m);
  return int(std::min<long long>(tiles, 1 << 30));
}

std::vector<int32_t> MoeDispatchRowOffsets(const MoeShape& shape, int tokens) {
  const int routed = std::max(tokens, 1) * shape.top_k;
  const int groups = std::min(shape.experts, routed);
  std::vector<int32_t> offsets = {0};
  for (int g = 0; g < groups; ++g) offsets.push_back(offsets.back() + routed / groups + (g < routed % groups ? 1 : 0));
  if (shape.shared_expert) offsets.push_back(offsets.back() + std::max(tokens, 1));
  return offsets;
}

absl::StatusOr<MoeLayerRoutes> DecideMoeRoutes(const KernelRegistry& registry, const Tactic& w13_tactic,
                                               const Tactic& w2_tactic, const MoeLayerRequest& request,
                                               const LayerAdmission& w13_admission,
                                               const LayerAdmission& w2_admission) {
  MoeLayerRoutes routes;
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    const bool w13 = gemm == MoeGemm::kW13;
    const LayerAdmission& admission = w13 ? w13_admission : w2_admission;
    absl::StatusOr<Route> route = DecideRoute(registry, w13 ? w13_tactic : w2_tactic, request.transform,
                                              request.policy, admission.admitted, admission.Describe());
    absl::Status status = route.ok() ? registry.CheckLaunchable(route->tactic, route->variant) : route.status();
    if (!status.ok()) return absl::Status(status.code(), fmt::format("{}: {}", MoeGemmName(gemm), std::string(status.message())));
    (w13 ? routes.w13 : routes.w2) = *std::move(route);
  }
  return routes;
}

size_t MoeScalesPerExpert(const MoeShape& shape, MoeGemm gemm) {
  return gemm == MoeGemm::kW13 ? size_t(shape.w13_n()) * size_t(shape.hidden) / kBlockK
                               : size_t(shape.hidden) * size_t(shape.intermediate) / kBlockK;
}

LayerAdmission CombineExpertAdmissions(std::span<const LayerAdmission> experts, size_t scales_per_expert,
                                       size_t max_reported) {
  LayerAdmission layer;
  for (size_t e = 0; e < experts.size(); ++e) {
    if (experts[e].admitted) continue;
    layer.admitted = false;
    layer.refused_count += experts[e].refused_count;
    for (const RefusedScale& refused : experts[e].refused) {
      if (layer.refused.size() >= max_reported) break;
      layer.refused.push_back(RefusedScale{e * scales_per_expert + refused.index, refused.raw});
    }
  }
  return layer;
}

}  // namespace mxdiff
