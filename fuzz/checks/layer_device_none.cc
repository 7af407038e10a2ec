#include "fuzz/checks/layer_device.h"

namespace mxdiff::fuzz {

absl::StatusOr<LayerDevice> OpenLayerDevice() {
  return absl::UnavailableError("built without CUDA: the MoE layer's kernels are not in this build");
}

absl::StatusOr<std::unique_ptr<MoeLayer>> CreateDeviceMoeLayer(const MoeLayerConfig&) { return OpenLayerDevice().status(); }

}  // namespace mxdiff::fuzz
