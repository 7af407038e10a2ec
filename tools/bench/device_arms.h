// The arms `mxdiff bench` times on a GPU, and the data they run on. Needs CUDA (built only with
// MXDIFF_HAVE_CUDA); the header itself is CUDA-free (streams cross as void*).
//
// GraphArm: the builtin kernels through GemmRunner::RunOnDevice, captured as one CUDA graph of
// `calls` launches that cycle through the weight sets; one replay is one sample, timed by two
// device events around the graph launch, with the L2 flush (if any) before the first event.
// HostArm: any arm through a host-in, host-out call (GemmRunner::Run, or an external kernel's
// C ABI), timed by the steady clock around `calls` calls: the only way to time an external
// kernel, whose ABI takes host memory; both arms of a comparison then run this way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/modules/gemm_module.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_runner.h"
#include "tools/bench/bench_arm.h"
#include "tools/bench/experiment.h"
#include "tools/bench/stats.h"

namespace mxdiff::bench {

// Random weights and activations. Scale bytes are uniform over ScaleClassRange(kAdmitted), so the folded
// transform is exact and both variants must give the same bits; codes are any byte;
// activations are normal fp16 of magnitude 2^-6..2^4 (never zeros: they can run faster).
struct HostLayer {
  std::vector<uint8_t> codes;   // groups x n x k/2
  std::vector<uint8_t> scales;  // groups x n x k/32
};
HostLayer MakeHostLayer(uint64_t seed, int groups, int n, int k);
std::vector<uint16_t> MakeActivations(uint64_t seed, size_t count);

// One shape's weight sets, prepared on one runner, with the activations and row offsets on the
// device. Set i's data depends on (seed, i) alone, so another runner gets the same weights.
class LayerSets {
 public:
  static absl::StatusOr<std::unique_ptr<LayerSets>> Create(GemmRunner& runner, int groups, int rows_per_group, int n,
                                                           int k, int count, uint64_t seed, bool keep_host);
  GemmRunner& runner() const { return runner_; }
  int groups() const { return groups_; }
  int n() const { return n_; }
  int k() const { return k_; }
  int rows() const { return row_offsets_.back(); }
  int count() const { return int(sets_.size()); }
  size_t set_bytes() const { return set_bytes_; }
  const std::vector<int32_t>& row_offsets() const { return row_offsets_; }
  const std::vector<uint16_t>& activations() const { return activations_; }
  const int32_t* device_row_offsets() const { return device_offsets_.as<const int32_t>(); }
  const uint16_t* device_activations() const { return device_activations_.as<const uint16_t>(); }
  const PreparedLayer& set(int i) const { return *sets_[size_t(i)]; }
  bool has_host() const { return !host_.empty(); }
  const HostLayer& host(int i) const { return host_[size_t(i)]; }  // keep_host only

 private:
  explicit LayerSets(GemmRunner& runner) : runner_(runner) {}
  GemmRunner& runner_;
  int groups_ = 0;
  int n_ = 0;
  int k_ = 0;
  size_t set_bytes_ = 0;
  std::vector<int32_t> row_offsets_;
  std::vector<uint16_t> activations_;
  DeviceBuffer device_offsets_;
  DeviceBuffer device_activations_;
  std::vector<std::unique_ptr<PreparedLayer>> sets_;
  std::vector<HostLayer> host_;
};

// Evicts L2 between replays: writes a buffer of twice the L2 size on the stream.
class L2Flusher {
 public:
  static absl::StatusOr<std::unique_ptr<L2Flusher>> Create(int device);
  absl::Status Flush(void* stream);
  size_t bytes() const { return memory_.bytes(); }

 private:
  DeviceBuffer memory_;
  uint8_t value_ = 0;
};

// `flusher` may be null. `stream` is the cudaStream_t everything runs on. The request is used
// as is: the sound protocol pins the tactic and fails closed; the naive one does neither.
absl::StatusOr<std::unique_ptr<BenchArm>> MakeGraphArm(std::string label, const LayerSets& sets, RunRequest request,
                                                       void* stream, int calls, L2Flusher* flusher);
// A builtin arm timed through GemmRunner::Run (host memory in and out).
absl::StatusOr<std::unique_ptr<BenchArm>> MakeHostBuiltinArm(std::string label, const LayerSets& sets,
                                                             RunRequest request, void* stream, int calls,
                                                             L2Flusher* flusher);
// An external kernel (fuzz/modules/mxdiff_kernel_abi.h) computing `transform` with the split
// partition of `tactic` and the arithmetic of `model`; `sets` must keep host copies.
absl::StatusOr<std::unique_ptr<BenchArm>> MakeExternalArm(std::string label, const std::string& library,
                                                          Transform transform, const Tactic& tactic, StepModel model,
                                                          const LayerSets& sets, void* stream, int calls,
                                                          L2Flusher* flusher);


}  // namespace mxdiff::bench
