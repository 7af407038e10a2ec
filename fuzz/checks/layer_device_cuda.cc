#include "fuzz/driver/calibration_guard.h"
#include "fuzz/checks/layer_device.h"
#include "kernels/gemm_runner.h"

namespace mxdiff::fuzz {
namespace {

struct Opened {
  absl::StatusOr<LayerDevice> device = absl::UnavailableError("not opened");
  std::unique_ptr<GemmRunner> runner;
};

Opened& Device() {
  static Opened* opened = [] {
    auto* o = new Opened;
    absl::StatusOr<std::unique_ptr<GemmRunner>> runner = GemmRunner::Create();
    if (!runner.ok()) {
      o->device = runner.status();
      return o;
    }
    absl::StatusOr<Calibration> calibration = CalibrateDevice();
    if (!calibration.ok()) {
      o->device = calibration.status();
      return o;
    }
    o->runner = *std::move(runner);
    o->device = LayerDevice{o->runner->DeviceName(), calibration->model, calibration->report};
    return o;
  }();
  return *opened;
}

}  // namespace

absl::StatusOr<LayerDevice> OpenLayerDevice() { return Device().device; }

absl::StatusOr<std::unique_ptr<MoeLayer>> CreateDeviceMoeLayer(const MoeLayerConfig& config) {
  Opened& opened = Device();
  if (!opened.device.ok()) return opened.device.status();
  return MoeLayer::Create(*opened.runner, config);
}

}  // namespace mxdiff::fuzz
