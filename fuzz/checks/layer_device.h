// fuzz_layer's device: the MoE layer of kernels/moe_layer.h on a GPU, where the build has CUDA and
// the machine a device whose m8n8k4 arithmetic the calibration guard (calibration_guard.h) matched
// to a step model. Two implementations chosen at link time: layer_device_cuda.cc and, in builds
// without CUDA, layer_device_none.cc (always Unavailable). Without a device fuzz_layer checks the
// CPU side of every case.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/moe_layer.h"
#include "reference/step_model.h"

namespace mxdiff::fuzz {

struct LayerDevice {
  std::string name;      // the GPU's
  StepModel model;       // the calibrated step model the reference must follow
  std::string report;    // the calibration guard's
};

// The device, once per process: Unavailable (no CUDA build, no GPU) or FailedPrecondition (the
// calibration guard matched no step model), with the reason.
absl::StatusOr<LayerDevice> OpenLayerDevice();

// A MoE layer on that device (OpenLayerDevice must have succeeded).
absl::StatusOr<std::unique_ptr<MoeLayer>> CreateDeviceMoeLayer(const MoeLayerConfig& config);

}  // namespace mxdiff::fuzz
