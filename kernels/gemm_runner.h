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
#include "kernels/output_poison.h"
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

// Run fills the device output with kRunnerPoisonByte (kernels/output_poison.h) before every
// launch, so an unwritten element shows.

// Device in, device out: no copies, no poisoning, no synchronization (benchmarks, graphs).
struct DeviceBatch {
  std::span<const int32_t> row_offsets;         // host copy: shape checks and grid size
  const int32_t* device_row_offsets = nullptr;  // the same values on the device
  const uint16_t* activations = nullptr;        // device, M x K fp16 bits, 8-byte aligned
  uint16_t* output = nullptr;                   // device, M x N fp16 bits
  void* stream = nullptr;                       // cudaStream_t; null: the runner's stream
};

struct RunRequest {
  TransformRequest transform = TransformRequest::kAuto;
  FallbackPolicy policy = FallbackPolicy::kFallback;
  std::optional<Tactic> tactic;  // the ordinary tactic; absent: DefaultTactic()
};

// One runner per device and thread: its staging buffers are reused across calls, and it keeps one
// split-K workspace per stream it launches on (launches on one stream share it in order).
class GemmRunner {
 public:
  virtual ~GemmRunner() = default;

  // Unavailable (with the CUDA error text) where there is no usable GPU.
  static absl::StatusOr<std::unique_ptr<GemmRunner>> Create(int device = 0);
  // The same with a subset of the built kernels (tests of the folded-missing fallback);
  // InvalidArgument if `registry` names a kernel this build lacks.
  static absl::StatusOr<std::unique_ptr<GemmRunner>> CreateWithRegistry(int device, KernelRegistry registry);

  virtual const KernelRegistry& registry() const = 0;
  virtual std::string DeviceName() const = 0;

  // Copies codes (groups x N x K/2) and raw scale bytes (groups x N x K/32) to the device and
  // returns once they are there. The layer runs on any runner and stream of that device
  // (runners differ only in their registries).
  virtual absl::StatusOr<std::unique_ptr<PreparedLayer>> Prepare(int groups, int n, int k,
                                                                std::span<const uint8_t> packed_codes,
                                                                std::span<const uint8_t> scale_bytes) = 0;

  // Prepare with the weights already in device memory of this runner's device, complete before
  // the call (fuzz_gemm materializes a case's recipes there): the codes (groups x N x K/2 bytes)
  // are read in place, so the caller keeps them unchanged and alive while the layer is used; the
  // raw scale bytes (groups x N x K/32) are prepared on the device. `admission` is the caller's
  // verdict on exactly these scale bytes (AdmitLayer over the host's copy): nothing crosses PCIe
  // and nothing is admitted twice. Unimplemented where a runner has no device.
  virtual absl::StatusOr<std::unique_ptr<PreparedLayer>> PrepareOnDeviceWeights(int groups, int n, int k,
                                                                                const uint8_t* device_codes,
                                                                                const uint8_t* device_scales,
                                                                                const LayerAdmission& admission) {
    (void)groups, (void)n, (void)k, (void)device_codes, (void)device_scales, (void)admission;
    return absl::UnimplementedError("this runner prepares from host weights only");
  }

  // Prepare with a scale audit's verdict on this layer (`mxdiff audit --json`): refused before
  // anything is copied unless CheckAuditedVerdict (reference/admission.h) accepts it, i.e. it
  // was made under this build's admission rule and describes exactly these scale bytes. The
  // layer's admission is then decided from the bytes by the same rule, as in Prepare: a verdict
  // can only confirm it, never widen it.
  absl::StatusOr<std::unique_ptr<PreparedLayer>> PrepareAudited(int groups, int n, int k,
                                                                std::span<const uint8_t> packed_codes,
                                                                std::span<const uint8_t> scale_bytes,
                                                                const AuditedLayerVerdict& verdict);

  // Host in, host out: copies activations (M x K fp16 bits) and row offsets in, launches the
  // routed kernel, copies M x N fp16 bits out. Bad input is an error before any launch, and
  // the output is not touched then. The returned route is what ran.
  virtual absl::StatusOr<Route> Run(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                                    std::span<const uint16_t> activations, std::span<uint16_t> output,
                                    const RunRequest& request) = 0;

  // RunOnDevice's device buffers are the caller's; the device output is not poisoned. Run
  // fills its device output with kRunnerOutputPoison before every launch. Launches on different
  // streams may run at once (each stream has its own workspace); a graph captured from a launch
  // keeps its stream's workspace, so it must not run beside other work of that stream.
  virtual absl::StatusOr<Route> RunOnDevice(const PreparedLayer& layer, const DeviceBatch& batch,
                                            const RunRequest& request) = 0;

  // Measures the ordinary candidates for this layer's shape and these row offsets, caches the
  // fastest for later requests without a tactic (before the dispatch table) and returns it.
  virtual absl::StatusOr<Tactic> Tune(const PreparedLayer& layer, std::span<const int32_t> row_offsets) = 0;

  // The tactic a request without one gets: the tuned one if cached, else the dispatch table's.
  virtual Tactic DefaultTactic(int n, int k, std::span<const int32_t> row_offsets) const = 0;

  // Checks the CUDA context after a launch: a sticky error (illegal address, ...) becomes a
  // status here instead of a crash, so a fuzzing campaign can record it as a finding.
  virtual absl::Status CheckDevice() = 0;
};

}  // namespace mxdiff
