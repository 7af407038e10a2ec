// A replay of the device MoE layer (kernels/moe_layer.h) against ReferenceMoeLayer, stage by
// stage: schedule, both tile maps (against FindGroupTile's enumeration), gathered rows, W13,
// SwiGLU, W2, output, and, where the stages were poisoned, nothing written beyond the routing's
// rows. Shared by fuzz_layer and the GPU tests.
#pragma once

#include <string>

#include "kernels/moe_layer.h"
#include "reference/moe_layer.h"

namespace mxdiff::fuzz {

struct StageDifference {
  std::string stage;        // empty: every stage equal; else "W13", "SwiGLU", "output", "W13-tile-map", ...
  std::string description;  // where and which bits
  bool empty() const { return stage.empty(); }
};

StageDifference CompareMoeStages(const MoeShape& shape, const MoeLayerStages& expected, const MoeDeviceStages& device,
                                 int tokens, bool poisoned, int w13_cta_m, int w2_cta_m);

// The reference options of the routes that ran (`model`: the device's calibrated step model).
MoeLayerOptions MoeReferenceOptions(const MoeLayerRoutes& routes, float limit,
                                    StepModel model = StepModel::kSm90Emulated);

}  // namespace mxdiff::fuzz
