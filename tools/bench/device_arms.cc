#include "tools/bench/device_arms.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <span>

#include "fmt/format.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/modules/external_module.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "reference/scale_class.h"
#include "reference/status_macros.h"
#include "tools/bench/bit_compare.h"

namespace mxdiff::bench {
namespace {

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Normal fp16: sign, exponent field 9..19 (2^-6..2^4), any mantissa.
uint16_t ModerateHalf(uint64_t bits) {
  const uint16_t exponent = uint16_t(9 + (bits >> 16) % 11);
  return uint16_t(((bits >> 32) & 1) << 15 | exponent << 10 | (bits & 0x3FF));
}

class Events {
 public:
  ~Events() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  absl::Status Create() {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"));
    return CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

absl::Status CheckRoute(const Route& route, const RunRequest& request) {
  if (request.policy == FallbackPolicy::kFailClosed && request.transform != TransformRequest::kAuto &&
      int(route.variant) != int(request.transform)) {
    return absl::FailedPreconditionError(
        fmt::format("asked for {}, the runner ran {}", TransformRequestName(request.transform), DescribeRoute(route)));
  }
  return absl::OkStatus();
}

class GraphArm final : public BenchArm {
 public:
  GraphArm(std::string label, const LayerSets& sets, RunRequest request, cudaStream_t stream, int calls,
           L2Flusher* flusher)
      : label_(std::move(label)), sets_(sets), request_(request), stream_(stream), calls_(calls), flusher_(flusher) {}
  ~GraphArm() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }

  absl::Status Init() {
    MXDIFF_RETURN_IF_ERROR(output_.Allocate(size_t(sets_.rows()) * sets_.n() * sizeof(uint16_t), "arm output"));
    return events_.Create();
  }

  std::string label() const override { return label_; }
  std::string route() const override { return route_.empty() ? "(not run)" : route_; }

  absl::StatusOr<std::vector<uint16_t>> RunSet(int index) override {
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaMemsetAsync(output_.as<void>(), kRunnerPoisonByte, output_.bytes(), stream_), "poison output"));
    MXDIFF_RETURN_IF_ERROR(Launch(index));
    std::vector<uint16_t> bits(output_.bytes() / sizeof(uint16_t));
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(bits.data(), output_.as<void>(), output_.bytes(), cudaMemcpyDeviceToHost, stream_), "copy output"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), fmt::format("{} on set {}", label_, index)));
    if (std::string unwritten = DescribeUnwritten(bits, sets_.n()); !unwritten.empty()) {
      return absl::InternalError(fmt::format("{} on set {}: {}", label_, index, unwritten));
    }
    return bits;
  }

  absl::Status WarmUp(int passes) override {
    for (int pass = 0; pass < passes; ++pass) {
      for (int i = 0; i < sets_.count(); ++i) MXDIFF_RETURN_IF_ERROR(Launch(i));
    }
    return CudaStatus(cudaStreamSynchronize(stream_), fmt::format("{} warm-up", label_));
  }

  absl::Status PrepareTiming(int capture_mode, bool launch_once) override {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureMode(capture_mode)), "begin capture"));
    absl::Status captured = absl::OkStatus();
    for (int i = 0; i < calls_ && captured.ok(); ++i) captured = Launch(i % sets_.count());
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph_);
    if (!captured.ok()) return absl::Status(captured.code(), fmt::format("capture of {}: {}", label_, std::string(captured.message())));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(end, fmt::format("capture of {}", label_)));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate"));
    if (!launch_once) return absl::OkStatus();
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"));
    return CudaStatus(cudaStreamSynchronize(stream_), fmt::format("first replay of {}", label_));
  }

  absl::StatusOr<ReplayTime> TimeReplay() override {
    if (exec_ == nullptr) return absl::FailedPreconditionError(fmt::format("{} was not captured", label_));
    if (flusher_ != nullptr) MXDIFF_RETURN_IF_ERROR(flusher_->Flush(stream_));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(events_.start(), stream_), "cudaEventRecord"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(events_.stop(), stream_), "cudaEventRecord"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(events_.stop()), fmt::format("replay of {}", label_)));
    float milliseconds = 0;
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaEventElapsedTime(&milliseconds, events_.start(), events_.stop()), "cudaEventElapsedTime"));
    const double replay_us = double(milliseconds) * 1e3;
    return ReplayTime{.per_call_us = replay_us / calls_, .replay_us = replay_us, .calls = calls_};
  }

  absl::StatusOr<std::vector<uint16_t>> LastOutput() override {
    std::vector<uint16_t> bits(output_.bytes() / sizeof(uint16_t));
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(bits.data(), output_.as<void>(), output_.bytes(), cudaMemcpyDeviceToHost, stream_), "copy output"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "copy output"));
    return bits;
  }
  int last_set() const override { return (calls_ - 1) % sets_.count(); }

 private:
  absl::Status Launch(int index) {
    const DeviceBatch batch{.row_offsets = sets_.row_offsets(),
                            .device_row_offsets = sets_.device_row_offsets(),
                            .activations = sets_.device_activations(),
                            .output = output_.as<uint16_t>(),
                            .stream = stream_};
    absl::StatusOr<Route> route = sets_.runner().RunOnDevice(sets_.set(index), batch, request_);
    if (!route.ok()) return route.status();
    MXDIFF_RETURN_IF_ERROR(CheckRoute(*route, request_));
    route_ = DescribeRoute(*route);
    return absl::OkStatus();
  }

  std::string label_;
  const LayerSets& sets_;
  RunRequest request_;
  cudaStream_t stream_;
  int calls_;
  L2Flusher* flusher_;
  DeviceBuffer output_;
  Events events_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::string route_;
};

// Host calls, one after another; the steady clock around `calls` of them is one sample.
class HostArm final : public BenchArm {
 public:
  using RunFn = std::function<absl::StatusOr<Route>(int set, std::span<uint16_t> output)>;
  HostArm(std::string label, const LayerSets& sets, RunFn run, cudaStream_t stream, int calls, L2Flusher* flusher)
      : label_(std::move(label)),
        sets_(sets),
        run_(std::move(run)),
        stream_(stream),
        calls_(calls),
        flusher_(flusher),
        output_(size_t(sets.rows()) * sets.n()) {}

  std::string label() const override { return label_; }
  std::string route() const override { return route_.empty() ? "(not run)" : route_; }

  absl::StatusOr<std::vector<uint16_t>> RunSet(int index) override {
    MXDIFF_RETURN_IF_ERROR(Call(index));
    if (std::string unwritten = DescribeUnwritten(output_, sets_.n()); !unwritten.empty()) {
      return absl::InternalError(fmt::format("{} on set {}: {}", label_, index, unwritten));
    }
    return output_;
  }
  absl::Status WarmUp(int passes) override {
    for (int pass = 0; pass < passes; ++pass) {
      for (int i = 0; i < sets_.count(); ++i) MXDIFF_RETURN_IF_ERROR(Call(i));
    }
    return absl::OkStatus();
  }
  absl::Status PrepareTiming(int, bool) override { return absl::OkStatus(); }

  absl::StatusOr<ReplayTime> TimeReplay() override {
    if (flusher_ != nullptr) {
      MXDIFF_RETURN_IF_ERROR(flusher_->Flush(stream_));
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "L2 flush"));
    }
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_; ++i) MXDIFF_RETURN_IF_ERROR(Call(i % sets_.count()));
    const double replay_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    last_set_ = (calls_ - 1) % sets_.count();
    return ReplayTime{.per_call_us = replay_us / calls_, .replay_us = replay_us, .calls = calls_};
  }
  absl::StatusOr<std::vector<uint16_t>> LastOutput() override { return output_; }
  int last_set() const override { return last_set_; }

 private:
  absl::Status Call(int index) {
    std::fill(output_.begin(), output_.end(), kRunnerOutputPoison);
    absl::StatusOr<Route> route = run_(index, output_);
    if (!route.ok()) return absl::Status(route.status().code(), fmt::format("{}: {}", label_, std::string(route.status().message())));
    route_ = DescribeRoute(*route);
    return absl::OkStatus();
  }

  std::string label_;
  const LayerSets& sets_;
  RunFn run_;
  cudaStream_t stream_;
  int calls_;
  L2Flusher* flusher_;
  std::vector<uint16_t> output_;
  std::string route_;
  int last_set_ = 0;
};

}  // namespace

HostLayer MakeHostLayer(uint64_t seed, int groups, int n, int k) {
  SplitMix64 rng(seed);
  HostLayer layer;
  layer.codes.resize(size_t(groups) * n * (k / 2));
  for (size_t i = 0; i < layer.codes.size(); i += 8) {
    uint64_t bits = rng.Next();
    for (size_t j = i; j < std::min(i + 8, layer.codes.size()); ++j, bits >>= 8) layer.codes[j] = uint8_t(bits);
  }
  layer.scales.resize(size_t(groups) * n * (k / kBlockK));
  const RawRange admitted = ScaleClassRange(ScaleClass::kAdmitted);
  const unsigned admitted_count = unsigned(admitted.last - admitted.first) + 1;
  for (size_t i = 0; i < layer.scales.size(); i += 16) {
    uint64_t bits = rng.Next();
    for (size_t j = i; j < std::min(i + 16, layer.scales.size()); ++j, bits >>= 4) {
      layer.scales[j] = uint8_t(admitted.first + (bits & 15) % admitted_count);
    }
  }
  return layer;
}

std::vector<uint16_t> MakeActivations(uint64_t seed, size_t count) {
  SplitMix64 rng(seed);
  std::vector<uint16_t> values(count);
  for (uint16_t& value : values) value = ModerateHalf(rng.Next());
  return values;
}

absl::StatusOr<std::unique_ptr<LayerSets>> LayerSets::Create(GemmRunner& runner, int groups, int rows_per_group, int n,
                                                             int k, int count, uint64_t seed, bool keep_host) {
  if (groups < 1 || rows_per_group < 1 || count < 1) {
    return absl::InvalidArgumentError(
        fmt::format("experts, rows per expert and weight sets must be >= 1 (got {}, {}, {})", groups, rows_per_group, count));
  }
  std::unique_ptr<LayerSets> sets(new LayerSets(runner));
  sets->groups_ = groups;
  sets->n_ = n;
  sets->k_ = k;
  sets->row_offsets_.push_back(0);
  for (int g = 0; g < groups; ++g) sets->row_offsets_.push_back(sets->row_offsets_.back() + rows_per_group);
  sets->activations_ = MakeActivations(seed ^ 0xAC71'0A71'0000'0000ull, size_t(sets->rows()) * k);
  for (int i = 0; i < count; ++i) {
    HostLayer layer = MakeHostLayer(seed + SplitMix64::kGamma * uint64_t(i + 1), groups, n, k);
    absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = runner.Prepare(groups, n, k, layer.codes, layer.scales);
    if (!prepared.ok()) return prepared.status();
    if (!(*prepared)->admission().admitted) {
      return absl::InternalError(fmt::format("weight set {} is not admitted: {}", i, (*prepared)->admission().Describe()));
    }
    sets->set_bytes_ = layer.codes.size() + layer.scales.size() * sizeof(uint16_t);  // the device copy
    sets->sets_.push_back(*std::move(prepared));
    if (keep_host) sets->host_.push_back(std::move(layer));
  }
  MXDIFF_RETURN_IF_ERROR(sets->device_offsets_.Allocate(sets->row_offsets_.size() * sizeof(int32_t), "row offsets"));
  MXDIFF_RETURN_IF_ERROR(
      sets->device_activations_.Allocate(sets->activations_.size() * sizeof(uint16_t), "activations"));
  // Complete before return: the arms launch on non-blocking streams, which do not wait for the null stream.
  MXDIFF_RETURN_IF_ERROR(CopyToDeviceAndWait(sets->device_offsets_.as<void>(), sets->row_offsets_.data(),
                                             sets->row_offsets_.size() * sizeof(int32_t), nullptr, "copy row offsets"));
  MXDIFF_RETURN_IF_ERROR(CopyToDeviceAndWait(sets->device_activations_.as<void>(), sets->activations_.data(),
                                             sets->activations_.size() * sizeof(uint16_t), nullptr,
                                             "copy activations"));
  return sets;
}

absl::StatusOr<std::unique_ptr<L2Flusher>> L2Flusher::Create(int device) {
  int l2_bytes = 0;
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), "L2 size"));
  auto flusher = std::make_unique<L2Flusher>();
  MXDIFF_RETURN_IF_ERROR(flusher->memory_.Allocate(2 * size_t(std::max(l2_bytes, 1 << 20)), "L2 flush"));
  return flusher;
}

absl::Status L2Flusher::Flush(void* stream) {
  return CudaStatus(cudaMemsetAsync(memory_.as<void>(), ++value_, memory_.bytes(), AsStream(stream)), "L2 flush");
}

absl::StatusOr<std::unique_ptr<BenchArm>> MakeGraphArm(std::string label, const LayerSets& sets, RunRequest request,
                                                       void* stream, int calls, L2Flusher* flusher) {
  auto arm = std::make_unique<GraphArm>(std::move(label), sets, request, AsStream(stream), calls, flusher);
  MXDIFF_RETURN_IF_ERROR(arm->Init());
  return std::unique_ptr<BenchArm>(std::move(arm));
}

absl::StatusOr<std::unique_ptr<BenchArm>> MakeHostBuiltinArm(std::string label, const LayerSets& sets,
                                                             RunRequest request, void* stream, int calls,
                                                             L2Flusher* flusher) {
  HostArm::RunFn run = [&sets, request](int index, std::span<uint16_t> output) -> absl::StatusOr<Route> {
    absl::StatusOr<Route> route =
        sets.runner().Run(sets.set(index), sets.row_offsets(), sets.activations(), output, request);
    if (route.ok()) MXDIFF_RETURN_IF_ERROR(CheckRoute(*route, request));
    return route;
  };
  return std::unique_ptr<BenchArm>(
      std::make_unique<HostArm>(std::move(label), sets, std::move(run), AsStream(stream), calls, flusher));
}

absl::StatusOr<std::unique_ptr<BenchArm>> MakeExternalArm(std::string label, const std::string& library,
                                                          Transform transform, const Tactic& tactic, StepModel model,
                                                          const LayerSets& sets, void* stream, int calls,
                                                          L2Flusher* flusher) {
  if (!sets.has_host()) return absl::InternalError("external arm: the weight sets keep no host copy");
  absl::StatusOr<std::unique_ptr<fuzz::GemmModule>> loaded = fuzz::LoadExternalModule(library);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<fuzz::GemmModule> module = *std::move(loaded);
  // One case per set, built once: the ABI takes the whole problem in host memory.
  auto cases = std::make_shared<std::vector<fuzz::FuzzCase>>();
  for (int i = 0; i < sets.count(); ++i) {
    fuzz::FuzzCase c;
    c.groups = sets.groups();
    c.n = sets.n();
    c.k = sets.k();
    c.row_offsets = sets.row_offsets();
    c.tactic = tactic;
    c.request = transform == Transform::kOrdinary ? TransformRequest::kOrdinary : TransformRequest::kFolded;
    c.policy = FallbackPolicy::kFailClosed;
    c.model = model;
    c.activations = sets.activations();
    c.packed_codes = sets.host(i).codes;
    c.scale_bytes = sets.host(i).scales;
    cases->push_back(std::move(c));
  }
  HostArm::RunFn run = [module, cases, tactic](int index, std::span<uint16_t> output) {
    return module->Run((*cases)[size_t(index)], tactic, output);
  };
  return std::unique_ptr<BenchArm>(
      std::make_unique<HostArm>(std::move(label), sets, std::move(run), AsStream(stream), calls, flusher));
}

}  // namespace mxdiff::bench
