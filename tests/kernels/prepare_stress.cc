#include "tests/kernels/prepare_stress.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "kernels/builtin_kernels.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "reference/decode_shapes.h"
#include "reference/reference_gemm.h"
#include "reference/status_macros.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  absl::Status Create() { return CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Copies until stopped: 32 MB host->device from pinned memory and 256 MB device->device. (With
// pageable memory, two such threads beside the stress's own copies hung the process on the H200.)
class CopyLoad {
 public:
  absl::Status Start(int threads) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this] { status_.store(Loop() ? 0 : 1); });
    }
    return absl::OkStatus();
  }
  absl::Status Stop() {
    stop_ = true;
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    return status_.load() == 0 ? absl::OkStatus() : absl::InternalError("the background copies failed");
  }

 private:
  bool Loop() {
    Stream stream;
    DeviceBuffer from, to;
    const size_t host_bytes = size_t(32) << 20, device_bytes = size_t(256) << 20;
    void* host = nullptr;
    if (cudaMallocHost(&host, host_bytes) != cudaSuccess) return false;
    bool ok = stream.Create().ok() && from.Allocate(device_bytes, "load").ok() && to.Allocate(device_bytes, "load").ok();
    while (ok && !stop_) {
      ok = cudaMemcpyAsync(from.as<void>(), host, host_bytes, cudaMemcpyHostToDevice, stream.get()) == cudaSuccess &&
           cudaMemcpyAsync(to.as<void>(), from.as<void>(), device_bytes, cudaMemcpyDeviceToDevice, stream.get()) ==
               cudaSuccess &&
           cudaStreamSynchronize(stream.get()) == cudaSuccess;
    }
    cudaFreeHost(host);
    return ok;
  }

  std::atomic<bool> stop_ = false;
  std::atomic<int> status_ = 0;
  std::vector<std::thread> workers_;
};

struct RoundShape {
  std::vector<int> rows;
  int n;
  int k;
};

RoundShape DrawShape(std::mt19937_64& rng) {
  if (rng() % 2 == 0) {  // a real decode shape: megabytes of weights, one row per expert
    const DecodeShape& shape = kDecodeShapes[rng() % std::size(kDecodeShapes)];
    return RoundShape{std::vector<int>(kDecodeTopK, 1), shape.n, shape.k};
  }
  std::vector<int> rows(1 + rng() % 4);
  for (int& r : rows) r = int(rng() % 20);
  rows[rng() % rows.size()] += 1;
  return RoundShape{rows, 1 + int(rng() % 600), kBlockK * (1 + int(rng() % 64))};
}

Tactic DrawTactic(std::mt19937_64& rng) {
  const CtaShape cta = kCtaShapes[rng() % kCtaShapeCount];
  const int split_choices[] = {1, 2, 3, 7, 16};
  return Tactic{.cta_m = cta.m,
                .cta_n = cta.n,
                .cta_k = cta.k,
                .splits = split_choices[rng() % std::size(split_choices)],
                .swizzle = int(rng() % 3)};
}

// A round's device buffers: per stream its row offsets and activations, and per launch
// (stream s, launch l at s * launches + l) an output.
struct RoundBuffers {
  std::vector<DeviceBuffer> offsets, activations, results;
};

// Everything but the weights on the device and complete before Prepare: the inputs uploaded
// and every output poisoned.
absl::Status StageRoundInputs(const RandomLayer& layer, std::vector<Stream>& streams, int launches_per_stream,
                              RoundBuffers& buffers) {
  const size_t outputs = size_t(layer.rows()) * size_t(layer.n);
  buffers.offsets.resize(streams.size());
  buffers.activations.resize(streams.size());
  absl::Status status = absl::OkStatus();
  for (size_t s = 0; s < streams.size() && status.ok(); ++s) {
    DeviceBuffer& offsets = buffers.offsets[s];
    DeviceBuffer& activations = buffers.activations[s];
    status = offsets.Allocate(layer.row_offsets.size() * sizeof(int32_t), "row offsets");
    if (status.ok()) status = offsets.Upload(std::span<const int32_t>(layer.row_offsets), streams[s].get(), "offsets");
    if (status.ok()) status = activations.Allocate(layer.activations.size() * 2, "activations");
    if (status.ok()) {
      status = activations.Upload(std::span<const uint16_t>(layer.activations), streams[s].get(), "activations");
    }
    for (int l = 0; l < launches_per_stream && status.ok(); ++l) {
      DeviceBuffer& result = buffers.results.emplace_back();
      status = result.Allocate(outputs * 2, "output");
      if (status.ok()) status = result.Fill(0xFF, streams[s].get(), "poison");
      if (status.ok()) status = CudaStatus(cudaStreamSynchronize(streams[s].get()), "poison");
    }
  }
  return status;
}

// Every launch of the round, the streams taking turns.
absl::Status LaunchRound(GemmRunner& runner, const PreparedLayer& prepared, const RandomLayer& layer,
                         const RunRequest& request, std::vector<Stream>& streams, int launches_per_stream,
                         RoundBuffers& buffers) {
  absl::Status status = absl::OkStatus();
  for (int l = 0; l < launches_per_stream && status.ok(); ++l) {
    for (size_t s = 0; s < streams.size() && status.ok(); ++s) {
      const DeviceBatch batch{.row_offsets = layer.row_offsets,
                              .device_row_offsets = buffers.offsets[s].as<int32_t>(),
                              .activations = buffers.activations[s].as<uint16_t>(),
                              .output = buffers.results[s * launches_per_stream + l].as<uint16_t>(),
                              .stream = streams[s].get()};
      status = runner.RunOnDevice(prepared, batch, request).status();
    }
  }
  return status;
}

// Every launch's output against the reference's; the first mismatch is described in the report.
absl::Status CompareRound(const std::vector<uint16_t>& expected, const RandomLayer& layer, Transform transform,
                          const Tactic& tactic, std::vector<Stream>& streams, int launches_per_stream,
                          RoundBuffers& buffers, PrepareStressReport& report) {
  const size_t outputs = size_t(layer.rows()) * size_t(layer.n);
  absl::Status status = absl::OkStatus();
  for (size_t s = 0; s < streams.size() && status.ok(); ++s) {
    for (int l = 0; l < launches_per_stream && status.ok(); ++l) {
      std::vector<uint16_t> got(outputs);
      status = buffers.results[s * launches_per_stream + l].Download(got.data(), outputs * 2, 0, streams[s].get(),
                                                                     "read the output");
      ++report.launches;
      const std::string mismatch = DescribeMismatch(expected, got, layer.n);
      if (!status.ok() || mismatch.empty()) continue;
      if (report.mismatched_launches++ == 0) {
        report.first_mismatch = fmt::format("round {} ({} groups, M {}, N {}, K {}, {} {}), stream {} launch {}:{}",
                                            report.rounds, layer.groups, layer.rows(), layer.n, layer.k,
                                            TransformName(transform), TacticName(tactic), s, l, mismatch);
      }
    }
  }
  return status;
}

}  // namespace

absl::StatusOr<PrepareStressReport> RunPrepareStress(GemmRunner& runner, const PrepareStressOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::vector<Stream> streams(size_t(options.streams));
  for (Stream& stream : streams) MXDIFF_RETURN_IF_ERROR(stream.Create());
  CopyLoad load;
  MXDIFF_RETURN_IF_ERROR(load.Start(options.load_threads));
  PrepareStressReport report;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  absl::Status status = absl::OkStatus();
  while (status.ok() && (report.rounds < options.rounds || elapsed() < options.seconds)) {
    const RoundShape shape = DrawShape(rng);
    const Transform transform = rng() % 2 ? Transform::kOrdinary : Transform::kFolded;
    const RandomLayer layer =
        MakeRandomLayer(rng, shape.n, shape.k, shape.rows,
                        transform == Transform::kOrdinary ? ScaleBytes::kWide : ScaleBytes::kAdmitted);
    const Tactic tactic = DrawTactic(rng);
    RoundBuffers buffers;
    status = StageRoundInputs(layer, streams, options.launches_per_stream, buffers);
    if (!status.ok()) break;
    absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared =
        runner.Prepare(layer.groups, layer.n, layer.k, layer.codes, layer.scales);
    if (!prepared.ok()) return prepared.status();
    const RunRequest request{.transform = transform == Transform::kOrdinary ? TransformRequest::kOrdinary
                                                                            : TransformRequest::kFolded,
                             .policy = FallbackPolicy::kFailClosed,
                             .tactic = tactic};
    status = LaunchRound(runner, **prepared, layer, request, streams, options.launches_per_stream, buffers);
    if (!status.ok()) break;
    std::vector<uint16_t> expected;
    status = ReferenceGemm(layer.problem(),
                           ReferenceOptions{.transform = transform, .model = StepModel::kSm90Emulated, .tactic = tactic},
                           expected);
    if (status.ok()) {
      status = CompareRound(expected, layer, transform, tactic, streams, options.launches_per_stream, buffers, report);
    }
    ++report.rounds;
  }
  const absl::Status stopped = load.Stop();
  MXDIFF_RETURN_IF_ERROR(status);
  MXDIFF_RETURN_IF_ERROR(stopped);
  MXDIFF_RETURN_IF_ERROR(runner.CheckDevice());
  return report;
}

}  // namespace mxdiff::testing
