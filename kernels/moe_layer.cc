#include "kernels/moe_layer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "fmt/core.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "kernels/device_scales.h"
#include "kernels/grouped_gemm_launch.h"
#include "kernels/launch_plan.h"
#include "kernels/moe_layer_kernels.h"
#include "kernels/output_poison.h"
#include "kernels/tile_map.h"
#include "reference/status_macros.h"

namespace mxdiff {
namespace {

struct GemmState {
  int n = 0;
  int k = 0;
  size_t codes_per_expert = 0;
  size_t scales_per_expert = 0;
  DeviceBuffer codes;
  DeviceScales scales;  // prepared for the ordinary transform and, per admitted expert, the folded one
  std::vector<LayerAdmission> experts;
  LayerAdmission layer;
  // Of the last capture:
  Tactic tactic;
  int capacity = 0;
  LaunchPlan plan;
  DeviceBuffer tile_map;
  DeviceBuffer semaphores;
  DeviceBuffer partials;
};

class CudaMoeLayer final : public MoeLayer {
 public:
  using MoeLayer::WriteWeights;
  CudaMoeLayer(GemmRunner& runner, const MoeLayerConfig& config) : runner_(runner), config_(config) {
    const MoeShape& s = config_.shape;
    max_rows_ = config_.max_tokens * s.top_k + (s.shared_expert ? config_.max_tokens : 0);
    gemm_[0].n = s.w13_n();
    gemm_[0].k = s.hidden;
    gemm_[1].n = s.hidden;
    gemm_[1].k = s.intermediate;
    for (GemmState& gemm : gemm_) {
      gemm.codes_per_expert = size_t(gemm.n) * size_t(gemm.k) / 2;
      gemm.scales_per_expert = MoeScalesPerExpert(s, MoeGemm(&gemm - gemm_));
      gemm.experts.assign(size_t(s.groups()), LayerAdmission{});
    }
  }

  ~CudaMoeLayer() override {
    cudaSetDevice(config_.device);
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cudaFreeHost(host_header_);
  }

  absl::Status Initialize() {
    const MoeShape& s = config_.shape;
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    int major = 0;
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, config_.device), "compute capability"));
    dependent_launch_ = config_.dependent_launch && major >= 9;
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&host_header_), sizeof(MoeDeviceHeader)), "cudaMallocHost"));
    const size_t tokens = size_t(config_.max_tokens), entries = tokens * size_t(s.top_k);
    const size_t rows = size_t(max_rows_), hidden = size_t(s.hidden), inter = size_t(s.intermediate);
    const size_t groups = size_t(s.groups());
    struct Allocation {
      DeviceBuffer* buffer;
      size_t bytes;
      const char* what;
    };
    for (const Allocation& a : {Allocation{&tokens_, sizeof(int32_t), "tokens"},
                                Allocation{&expert_ids_, entries * sizeof(int32_t), "expert ids"},
                                Allocation{&weights_, entries * sizeof(float), "routing weights"},
                                Allocation{&activations_, tokens * hidden * 2, "activations"},
                                Allocation{&header_, sizeof(MoeDeviceHeader), "routing header"},
                                Allocation{&row_offsets_, (groups + 1) * sizeof(int32_t), "row offsets"},
                                Allocation{&row_token_, rows * sizeof(int32_t), "row tokens"},
                                Allocation{&entry_row_, entries * sizeof(int32_t), "entry rows"},
                                Allocation{&gathered_, rows * hidden * 2, "gathered rows"},
                                Allocation{&w13_out_, rows * 2 * inter * 2, "W13 output"},
                                Allocation{&activated_, rows * inter * 2, "SwiGLU output"},
                                Allocation{&w2_out_, rows * hidden * 2, "W2 output"},
                                Allocation{&output_, tokens * hidden * 2, "layer output"}}) {
      MXDIFF_RETURN_IF_ERROR(a.buffer->Allocate(a.bytes, a.what));
      MXDIFF_RETURN_IF_ERROR(a.buffer->Fill(0, stream_, "clear"));
    }
    // Weights: zero codes, raw scale 127 (2^0, admitted) for every expert.
    for (GemmState& gemm : gemm_) {
      MXDIFF_RETURN_IF_ERROR(gemm.codes.Allocate(groups * gemm.codes_per_expert, "weight codes"));
      MXDIFF_RETURN_IF_ERROR(gemm.codes.Fill(0, stream_, "clear codes"));
      // Room for both transforms (the experts' verdicts change with every write), then raw 127
      // (2^0) everywhere: admitted, as the experts' initial verdicts (LayerAdmission{}) say.
      const LayerAdmission admitted;
      MXDIFF_RETURN_IF_ERROR(gemm.scales.Allocate(groups * gemm.scales_per_expert, admitted));
      MXDIFF_RETURN_IF_ERROR(gemm.scales.Fill(127, admitted, groups * gemm.scales_per_expert, stream_));
    }
    return CudaStatus(ConfigureMoeRoute(MoeRouteSharedBytes(s.groups(), config_.max_tokens, s.top_k, max_rows_)),
                "configure the routing kernel");
  }

  const MoeLayerConfig& config() const override { return config_; }
  int max_rows() const override { return max_rows_; }
  int tile_capacity(MoeGemm gemm) const override { return gemm_[int(gemm)].capacity; }
  const LayerAdmission& admission(MoeGemm gemm) const override { return gemm_[int(gemm)].layer; }

  absl::Status WriteWeights(MoeGemm which, int first_expert, std::span<const uint8_t> codes,
                            const AdmittedScales& scales) override {
    GemmState& gemm = gemm_[int(which)];
    const std::span<const uint8_t> scale_bytes = scales.bytes();
    const int groups = config_.shape.groups();
    const size_t count = codes.size() / gemm.codes_per_expert;
    if (codes.empty() || codes.size() % gemm.codes_per_expert != 0 || first_expert < 0 ||
        first_expert + count > size_t(groups) || scale_bytes.size() != count * gemm.scales_per_expert ||
        scales.per_expert() != gemm.scales_per_expert) {
      return absl::InvalidArgumentError(fmt::format(
          "{} weights: {} code bytes and {} scale bytes from expert {}: an expert has {} and {}, the layer {} experts",
          MoeGemmName(which), codes.size(), scale_bytes.size(), first_expert, gemm.codes_per_expert,
          gemm.scales_per_expert, groups));
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "wait for the layer"));
    MXDIFF_RETURN_IF_ERROR(
        gemm.codes.Upload(codes.data(), codes.size(), first_expert * gemm.codes_per_expert, stream_, "copy codes"));
    MXDIFF_RETURN_IF_ERROR(gemm.scales.Write(scales, first_expert * gemm.scales_per_expert, stream_));
    std::copy(scales.experts().begin(), scales.experts().end(), gemm.experts.begin() + first_expert);
    gemm.layer = CombineExpertAdmissions(gemm.experts, gemm.scales_per_expert);
    return absl::OkStatus();
  }

  absl::Status SetInputs(int tokens, std::span<const uint16_t> activations, std::span<const int32_t> expert_ids,
                         std::span<const float> weights) override {
    const MoeShape& s = config_.shape;
    if (tokens < 0 || tokens > config_.max_tokens) {
      return absl::InvalidArgumentError(
          fmt::format("{} tokens: the layer was created for 0..{} tokens", tokens, config_.max_tokens));
    }
    const size_t entries = size_t(tokens) * size_t(s.top_k);
    if (activations.size() != size_t(tokens) * size_t(s.hidden) || expert_ids.size() != entries ||
        weights.size() != entries) {
      return absl::InvalidArgumentError(fmt::format(
          "{} tokens need {} activations, {} expert ids and {} weights; got {}, {} and {}", tokens,
          size_t(tokens) * size_t(s.hidden), entries, entries, activations.size(), expert_ids.size(), weights.size()));
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "wait for the layer"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(tokens_.as<void>(), &tokens, sizeof tokens, cudaMemcpyHostToDevice,
                                             stream_), "copy tokens"));
    if (tokens > 0) {
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(activations_.as<void>(), activations.data(), activations.size_bytes(),
                                               cudaMemcpyHostToDevice, stream_), "copy activations"));
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(expert_ids_.as<void>(), expert_ids.data(), expert_ids.size_bytes(),
                                               cudaMemcpyHostToDevice, stream_), "copy expert ids"));
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(weights_.as<void>(), weights.data(), weights.size_bytes(),
                                               cudaMemcpyHostToDevice, stream_), "copy routing weights"));
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "copy inputs");
  }

  absl::StatusOr<MoeLayerRoutes> Capture(const MoeLayerRequest& request) override {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "wait for the layer"));
    const MoeShape& s = config_.shape;
    const std::vector<int32_t> dispatch_rows = MoeDispatchRowOffsets(s, config_.max_tokens);
    Tactic tactics[2];
    for (int g = 0; g < 2; ++g) {
      const std::optional<Tactic>& asked = g == 0 ? request.w13_tactic : request.w2_tactic;
      tactics[g] = asked ? *asked : runner_.DefaultTactic(gemm_[g].n, gemm_[g].k, dispatch_rows);
    }
    absl::StatusOr<MoeLayerRoutes> routes =
        DecideMoeRoutes(runner_.registry(), tactics[0], tactics[1], request, gemm_[0].layer, gemm_[1].layer);
    if (!routes.ok()) return routes.status();
    const Route* route[2] = {&routes->w13, &routes->w2};
    if (exec_ != nullptr) {
      cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
    for (int g = 0; g < 2; ++g) {
      GemmState& gemm = gemm_[g];
      const int configured = g == 0 ? config_.w13_tile_capacity : config_.w2_tile_capacity;
      const int capacity = configured > 0 ? configured : MoeWorstMTiles(s, config_.max_tokens, route[g]->tactic.cta_m);
      absl::StatusOr<LaunchPlan> plan =
          PlanCapacityLaunch(route[g]->tactic, s.groups(), gemm.n, gemm.k, max_rows_, capacity);
      if (!plan.ok()) {
        return absl::Status(plan.status().code(), fmt::format("{}: {}", MoeGemmName(MoeGemm(g)), std::string(plan.status().message())));
      }
      if (gemm.tile_map.bytes() < size_t(capacity) * 16 || capacity != gemm.capacity) {
        MXDIFF_RETURN_IF_ERROR(gemm.tile_map.Allocate(size_t(capacity) * 16, "tile map"));
      }
      if (plan->splits > 1 && (gemm.semaphores.bytes() < plan->semaphore_count * sizeof(int32_t) ||
                               gemm.partials.bytes() < plan->partial_bytes)) {
        MXDIFF_RETURN_IF_ERROR(gemm.semaphores.Allocate(plan->semaphore_count * sizeof(int32_t), "split-K semaphores"));
        MXDIFF_RETURN_IF_ERROR(gemm.partials.Allocate(plan->partial_bytes, "split-K partials"));
      }
      if (plan->splits > 1) {  // semaphores start at zero; every completed launch leaves them so
        MXDIFF_RETURN_IF_ERROR(gemm.semaphores.Fill(0, stream_, "clear semaphores"));
      }
      gemm.tactic = route[g]->tactic;
      gemm.capacity = capacity;
      gemm.plan = *plan;
    }
    request_ = request;
    routes_ = *routes;
    MXDIFF_RETURN_IF_ERROR(Instantiate());
    return routes_;
  }

  absl::StatusOr<MoeReplay> Replay() override { return Run(/*graph=*/true); }
  absl::StatusOr<MoeReplay> RunEager() override { return Run(/*graph=*/false); }

  absl::Status ReadStages(MoeDeviceStages& out) override {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "wait for the layer"));
    const MoeShape& s = config_.shape;
    const size_t tokens = size_t(config_.max_tokens), entries = tokens * size_t(s.top_k);
    const size_t rows = size_t(max_rows_), hidden = size_t(s.hidden), inter = size_t(s.intermediate);
    MoeDeviceHeader header{};
    MXDIFF_RETURN_IF_ERROR(Read(header_, &header, sizeof header));
    out.tokens = header.tokens;
    out.rows = header.rows;
    auto read = [&](auto& vector, const DeviceBuffer& buffer, size_t count) {
      vector.resize(count);
      return Read(buffer, vector.data(), count * sizeof(vector[0]));
    };
    MXDIFF_RETURN_IF_ERROR(read(out.row_offsets, row_offsets_, size_t(s.groups()) + 1));
    MXDIFF_RETURN_IF_ERROR(read(out.row_token, row_token_, rows));
    MXDIFF_RETURN_IF_ERROR(read(out.entry_row, entry_row_, entries));
    MXDIFF_RETURN_IF_ERROR(read(out.w13_tile_map, gemm_[0].tile_map, size_t(gemm_[0].capacity) * kTileMapInts));
    MXDIFF_RETURN_IF_ERROR(read(out.w2_tile_map, gemm_[1].tile_map, size_t(gemm_[1].capacity) * kTileMapInts));
    MXDIFF_RETURN_IF_ERROR(read(out.gathered, gathered_, rows * hidden));
    MXDIFF_RETURN_IF_ERROR(read(out.w13, w13_out_, rows * 2 * inter));
    MXDIFF_RETURN_IF_ERROR(read(out.activated, activated_, rows * inter));
    MXDIFF_RETURN_IF_ERROR(read(out.w2, w2_out_, rows * hidden));
    return read(out.output, output_, tokens * hidden);
  }

  absl::Status EnqueueStages(void* stream, unsigned mask) override {
    if (!request_) return absl::FailedPreconditionError("the MoE layer has not been captured: call Capture first");
    return Enqueue(static_cast<cudaStream_t>(stream), mask);
  }

  absl::Status CheckDevice() override {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "device"));
    return CudaStatus(cudaGetLastError(), "device");
  }

 private:
  absl::Status Read(const DeviceBuffer& buffer, void* host, size_t bytes) {
    return buffer.Download(host, bytes, 0, stream_, "read back");
  }

  absl::Status Instantiate() {
    cudaGraph_t graph = nullptr;
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture"));
    const absl::Status enqueued = Enqueue(stream_, kMoeStageAll);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (!enqueued.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return enqueued;
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(ended, "end capture"));
    const cudaError_t instantiated = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    return CudaStatus(instantiated, "instantiate the graph");
  }

  absl::Status Enqueue(cudaStream_t stream, unsigned mask) {
    const MoeShape& s = config_.shape;
    if (config_.poison_stages && mask == kMoeStageAll) {
      for (DeviceBuffer* buffer : {&header_, &row_offsets_, &row_token_, &entry_row_, &gemm_[0].tile_map,
                             &gemm_[1].tile_map, &gathered_, &w13_out_, &activated_, &w2_out_, &output_}) {
        MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(buffer->as<void>(), kRunnerPoisonByte, buffer->bytes(), stream), "poison"));
      }
    }
    // A W13 that routes itself needs nothing of the routing kernel: it goes first, and the routing
    // kernel runs beside it (MoeRouteArgs::after_w13).
    const bool w13_first = (mask & kMoeStageW13) && W13RoutesItself();
    if (w13_first) MXDIFF_RETURN_IF_ERROR(EnqueueW13(stream));
    if (mask & kMoeStageRoute) MXDIFF_RETURN_IF_ERROR(EnqueueRoute(stream, /*after_w13=*/w13_first));
    if ((mask & kMoeStageW13) && !w13_first) MXDIFF_RETURN_IF_ERROR(EnqueueW13(stream));
    if (mask & kMoeStageSwiglu) {
      const MoeSwigluArgs swiglu{.header = header_.as<MoeDeviceHeader>(),
                                 .w13 = w13_out_.as<uint16_t>(),
                                 .activated = activated_.as<uint16_t>(),
                                 .intermediate = s.intermediate,
                                 .max_rows = max_rows_,
                                 .limit = config_.swiglu_limit};
      MXDIFF_RETURN_IF_ERROR(CudaStatus(LaunchMoeSwiglu(swiglu, stream, dependent_launch_), "launch SwiGLU"));
    }
    if (mask & kMoeStageW2) {
      MXDIFF_RETURN_IF_ERROR(LaunchGemm(1, routes_.w2, activated_.as<uint16_t>(), nullptr, {}, nullptr, w2_out_, stream));
    }
    if (mask & kMoeStageCombine) {
      const MoeCombineArgs combine{.header = header_.as<MoeDeviceHeader>(),
                                   .row_offsets = row_offsets_.as<int32_t>(),
                                   .entry_row = entry_row_.as<int32_t>(),
                                   .weights = weights_.as<float>(),
                                   .w2 = w2_out_.as<uint16_t>(),
                                   .output = output_.as<uint16_t>(),
                                   .experts = s.experts,
                                   .top_k = s.top_k,
                                   .shared_expert = s.shared_expert ? 1 : 0,
                                   .hidden = s.hidden,
                                   .max_tokens = config_.max_tokens};
      MXDIFF_RETURN_IF_ERROR(CudaStatus(LaunchMoeCombine(combine, stream, dependent_launch_), "launch combine"));
    }
    return absl::OkStatus();
  }

  absl::Status EnqueueRoute(cudaStream_t stream, bool after_w13) {
    const MoeShape& s = config_.shape;
    MoeRouteArgs route;
    route.experts = s.experts;
    route.top_k = s.top_k;
    route.shared_expert = s.shared_expert ? 1 : 0;
    route.groups = s.groups();
    route.max_tokens = config_.max_tokens;
    route.max_rows = max_rows_;
    route.hidden = s.hidden;
    route.tokens = tokens_.as<int32_t>();
    route.expert_ids = expert_ids_.as<int32_t>();
    route.activations = activations_.as<uint16_t>();
    for (int g = 0; g < 2; ++g) {
      route.cta_m[g] = gemm_[g].tactic.cta_m;
      route.capacity[g] = gemm_[g].capacity;
      route.tile_map[g] = gemm_[g].tile_map.as<int32_t>();
    }
    route.row_offsets = row_offsets_.as<int32_t>();
    route.row_token = row_token_.as<int32_t>();
    route.entry_row = entry_row_.as<int32_t>();
    route.gathered = config_.gather_in_w13 ? nullptr : gathered_.as<uint16_t>();
    route.header = header_.as<MoeDeviceHeader>();
    route.after_w13 = after_w13;
    return CudaStatus(LaunchMoeRoute(route, stream, after_w13 && dependent_launch_), "launch route+gather");
  }

  absl::Status EnqueueW13(cudaStream_t stream) {
    const MoeShape& s = config_.shape;
    if (W13RoutesItself()) {
      const TileRouting routing{.tokens = tokens_.as<int32_t>(),
                                .expert_ids = expert_ids_.as<int32_t>(),
                                .max_tokens = config_.max_tokens,
                                .top_k = s.top_k,
                                .experts = s.experts,
                                .shared_expert = s.shared_expert ? 1 : 0,
                                .other_cta_m = gemm_[1].tactic.cta_m,
                                .other_capacity = gemm_[1].capacity};
      return LaunchGemm(0, routes_.w13, activations_.as<uint16_t>(), nullptr, routing, gathered_.as<uint16_t>(),
                        w13_out_, stream);
    }
    if (config_.gather_in_w13) {
      return LaunchGemm(0, routes_.w13, activations_.as<uint16_t>(), row_token_.as<int32_t>(), {},
                        gathered_.as<uint16_t>(), w13_out_, stream);
    }
    return LaunchGemm(0, routes_.w13, gathered_.as<uint16_t>(), nullptr, {}, nullptr, w13_out_, stream);
  }

  bool W13RoutesItself() const {
    return config_.gather_in_w13 && config_.route_in_w13 &&
           config_.max_tokens * config_.shape.top_k <= kMaxSelfRoutedEntries;
  }

  // `row_source`, `tile_routing`, `record`: see KernelLaunch.
  absl::Status LaunchGemm(int g, const Route& route, const uint16_t* input, const int32_t* row_source,
                          const TileRouting& tile_routing, uint16_t* record, const DeviceBuffer& output, cudaStream_t stream) {
    GemmState& gemm = gemm_[g];
    const absl::Status status = LaunchPlannedGroupedGemm(
        DeviceGemmArgs{.transform = route.variant,
                       .tactic = route.tactic,
                       .groups = config_.shape.groups(),
                       .n = gemm.n,
                       .k = gemm.k,
                       .row_offsets = {},
                       .device_row_offsets = row_offsets_.as<int32_t>(),
                       .tile_map = gemm.tile_map.as<int32_t>(),
                       .activations = input,
                       .row_source = row_source,
                       .tile_routing = tile_routing,
                       .record = record,
                       .codes = gemm.codes.as<uint8_t>(),
                       .scales = gemm.scales.scales(route.variant),
                       .output = output.as<uint16_t>(),
                       .semaphores = gemm.semaphores.as<int>(),
                       .semaphore_count = gemm.semaphores.bytes() / sizeof(int32_t),
                       .partials = gemm.partials.as<float>(),
                       .partial_bytes = gemm.partials.bytes(),
                       .stream = stream,
                       .dependent = dependent_launch_},
        gemm.plan);
    if (status.ok()) return status;
    return absl::Status(status.code(), fmt::format("{}: {}", MoeGemmName(MoeGemm(g)), std::string(status.message())));
  }

  absl::StatusOr<MoeReplay> Run(bool graph) {
    if (!request_ || exec_ == nullptr) {
      return absl::FailedPreconditionError("the MoE layer has not been captured: call Capture first");
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config_.device), "cudaSetDevice"));
    MoeReplay replay;
    // The weights written since the capture may route a GEMM differently: the same request,
    // decided again on the verdicts of now.
    absl::StatusOr<MoeLayerRoutes> now = DecideMoeRoutes(runner_.registry(), gemm_[0].tactic, gemm_[1].tactic,
                                                         *request_, gemm_[0].layer, gemm_[1].layer);
    if (!now.ok()) return now.status();
    if (now->w13 != routes_.w13 || now->w2 != routes_.w2) {
      routes_ = *now;
      if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
      MXDIFF_RETURN_IF_ERROR(Instantiate());
      replay.recaptured = true;
    }
    routes_.w13.detail = now->w13.detail;
    routes_.w2.detail = now->w2.detail;
    replay.routes = routes_;
    if (graph) {
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, stream_), "launch the graph"));
    } else {
      MXDIFF_RETURN_IF_ERROR(Enqueue(stream_, kMoeStageAll));
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(host_header_, header_.as<void>(), sizeof(MoeDeviceHeader),
                                             cudaMemcpyDeviceToHost, stream_), "read the routing header"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), graph ? "the layer's graph" : "the layer"));
    const MoeDeviceHeader& h = *host_header_;
    switch (MoeRoutingVerdict(h.verdict)) {
      case MoeRoutingVerdict::kOk:
        return replay;
      case MoeRoutingVerdict::kTooManyTokens:
        return absl::InvalidArgumentError(
            fmt::format("{} tokens: the graph was captured for 0..{}; refused, no stage ran", h.detail[0],
                        config_.max_tokens));
      case MoeRoutingVerdict::kInvalidExpert:
        return absl::InvalidArgumentError(fmt::format("token {} slot {}: expert id {} is outside 0..{}", h.detail[0],
                                                      h.detail[1], h.detail[2], config_.shape.experts - 1));
      case MoeRoutingVerdict::kOverCapacity:
        return absl::ResourceExhaustedError(fmt::format(
            "the routing needs {} W13 M tiles ({}) and {} W2 M tiles ({}) for its {} rows; the graph was captured "
            "for {} and {}: refused, no stage ran",
            h.detail[0], TacticName(gemm_[0].tactic), h.detail[1], TacticName(gemm_[1].tactic), h.detail[2],
            gemm_[0].capacity, gemm_[1].capacity));
    }
    return absl::InternalError(fmt::format("the routing kernel wrote verdict {}", h.verdict));
  }

  GemmRunner& runner_;
  MoeLayerConfig config_;
  int max_rows_ = 0;
  bool dependent_launch_ = false;
  cudaStream_t stream_ = nullptr;
  MoeDeviceHeader* host_header_ = nullptr;
  DeviceBuffer tokens_, expert_ids_, weights_, activations_;
  DeviceBuffer header_, row_offsets_, row_token_, entry_row_;
  DeviceBuffer gathered_, w13_out_, activated_, w2_out_, output_;
  GemmState gemm_[2];
  std::optional<MoeLayerRequest> request_;
  MoeLayerRoutes routes_;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MoeLayer>> MoeLayer::Create(GemmRunner& runner, const MoeLayerConfig& config) {
  MXDIFF_RETURN_IF_ERROR(ValidateMoeShape(config.shape));
  if (config.max_tokens < 1 || config.max_tokens > kMaxMoeTokens) {
    return absl::InvalidArgumentError(fmt::format("max_tokens must be 1..{}, got {}", kMaxMoeTokens, config.max_tokens));
  }
  if (config.max_tokens * config.shape.top_k > kMaxMoeEntries) {
    return absl::InvalidArgumentError(fmt::format("max_tokens x top_k = {} exceeds the routing kernel's {}",
                                                  config.max_tokens * config.shape.top_k, kMaxMoeEntries));
  }
  if (config.w13_tile_capacity < 0 || config.w2_tile_capacity < 0) {
    return absl::InvalidArgumentError("tile capacities must be >= 0 (0: the worst routing of max_tokens)");
  }
  if (!std::isfinite(config.swiglu_limit) || !(config.swiglu_limit > 0)) {
    return absl::InvalidArgumentError(fmt::format("swiglu_limit must be finite and positive, got {}", config.swiglu_limit));
  }
  auto layer = std::make_unique<CudaMoeLayer>(runner, config);
  MXDIFF_RETURN_IF_ERROR(layer->Initialize());
  return std::unique_ptr<MoeLayer>(std::move(layer));
}

}  // namespace mxdiff
