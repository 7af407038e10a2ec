// Host API of the SM70-style MXFP4 x FP16 grouped GEMM kernels. CUDA-free header: callers
// (tests, fuzzers, tools, benchmarks) need no nvcc. Built only where CUDA is available
// (MXDIFF_HAVE_CUDA); `GemmRunner::Create` reports a clear error where no GPU exists.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/route.h"
#include "reference/admission.h"
#include "reference/problem.h"

namespace mxdiff {

// A layer's weights on the device: packed codes, the scales prepared for the ordinary
// transform and (only when admitted) for the folded one, and the admission verdict, all
// decided once at prepare time. Nothing later can flip the verdict.
class PreparedLayer {
 public:
  virtual ~PreparedLayer() = default;
  virtual int groups() const = 0;
  virtual int n() const = 0;
  virtual int k() const = 0;
  virtual const LayerAdmission& admission() const = 0;
};

struct RunRequest {
  TransformRequest transform = TransformRequest::kAuto;
  FallbackPolicy policy = FallbackPolicy::kFallback;
  std::optional<Tactic> tactic;  // the ordinary tactic; absent: the dispatch table chooses
};

class GemmRunner {
 public:
  virtual ~GemmRunner() = default;

  // Unavailable (with the CUDA error text) where there is no usable GPU.
  static absl::StatusOr<std::unique_ptr<GemmRunner>> Create(int device = 0);

  virtual const KernelRegistry& registry() const = 0;
  virtual std::string DeviceName() const = 0;

  // Copies codes (groups x N x K/2) and raw scale bytes (groups x N x K/32) to the device.
  virtual absl::StatusOr<std::unique_ptr<PreparedLayer>> Prepare(int groups, int n, int k,
                                                                std::span<const uint8_t> packed_codes,
                                                                std::span<const uint8_t> scale_bytes) = 0;

  // Host in, host out: copies activations (M x K fp16 bits) and row offsets in, launches the
  // routed kernel, copies M x N fp16 bits out. Bad input is an error before any launch, and
  // the output is not touched then. The returned route is what ran.
  virtual absl::StatusOr<Route> Run(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                                    std::span<const uint16_t> activations, std::span<uint16_t> output,
                                    const RunRequest& request) = 0;

  // Checks the CUDA context after a launch: a sticky error (illegal address, ...) becomes a
  // status here instead of a crash, so a fuzzing campaign can record it as a finding.
  virtual absl::Status CheckDevice() = 0;
};

}  // namespace mxdiff
