#include "fmt/format.h"
#include "fuzz/calibration_guard.h"
#include "fuzz/modules/kernel_modules.h"
#include "tools/repro/kernel_modules.h"

namespace mxdiff::repro {

GpuModules LoadGpuModules() {
  GpuModules gpu;
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner = GemmRunner::Create();
  if (!runner.ok()) {
    gpu.note = fmt::format("no GPU side: no CUDA device ({})", runner.status().ToString());
    return gpu;
  }
  std::shared_ptr<GemmRunner> shared(std::move(*runner));
  absl::StatusOr<fuzz::Calibration> calibration = fuzz::CalibrateDevice(*shared);
  if (!calibration.ok()) {
    gpu.note = fmt::format("calibration guard failed on {}: {}", shared->DeviceName(),
                           calibration.status().ToString());
    gpu.calibration_failed = true;
    return gpu;
  }
  gpu.note = fmt::format("{} calibrated as {}\n{}", shared->DeviceName(), StepModelName(calibration->model),
                         calibration->report);
  absl::StatusOr<std::vector<std::unique_ptr<fuzz::GemmModule>>> modules =
      fuzz::MakeBuiltinModules(shared, calibration->model);
  if (!modules.ok()) {
    gpu.note += fmt::format("kernel modules: {}\n", modules.status().ToString());
    gpu.calibration_failed = true;
    return gpu;
  }
  gpu.modules = *std::move(modules);
  return gpu;
}

}  // namespace mxdiff::repro
