#include "tools/bench/layer_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "fmt/format.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "kernels/tune_on_first_use.h"
#include "reference/status_macros.h"
#include "tools/bench/bit_compare.h"
#include "tools/bench/device_arms.h"
#include "tools/bench/naive_protocol.h"
#include "tools/bench/nvml_monitor.h"
#include "tools/bench/paired_steps.h"

namespace mxdiff::bench {
namespace {

constexpr int kCaptureThreadLocal = int(cudaStreamCaptureModeThreadLocal);
constexpr int kWeightChunk = 16;  // experts written per WriteWeights call

struct LayerInputs {
  std::vector<uint16_t> activations;  // tokens x hidden
  std::vector<int32_t> expert_ids;    // tokens x top_k, distinct per token
  std::vector<float> weights;         // tokens x top_k, positive, summing to 1 per token
};

std::vector<LayerInputs> MakeRoutings(const MoeShape& shape, int tokens, int count, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<LayerInputs> routings(size_t(std::max(count, 1)));
  for (LayerInputs& r : routings) {
    r.activations = MakeActivations(rng.Next(), size_t(tokens) * shape.hidden);
    for (int t = 0; t < tokens; ++t) {
      float sum = 0;
      for (int slot = 0; slot < shape.top_k; ++slot) {
        int32_t id = 0;
        do {
          id = int32_t(rng.Next() % uint64_t(shape.experts));
        } while (shape.top_k <= shape.experts &&
                 std::find(r.expert_ids.end() - slot, r.expert_ids.end(), id) != r.expert_ids.end());
        r.expert_ids.push_back(id);
        r.weights.push_back(0.05f + float(rng.Next() % 1000) / 1000.0f);
        sum += r.weights.back();
      }
      for (int slot = 0; slot < shape.top_k; ++slot) r.weights[r.weights.size() - 1 - slot] /= sum;
    }
  }
  return routings;
}

absl::Status WriteGeneratedWeights(MoeLayer& layer, const MoeShape& shape, uint64_t seed) {
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    const int n = gemm == MoeGemm::kW13 ? shape.w13_n() : shape.hidden;
    const int k = gemm == MoeGemm::kW13 ? shape.hidden : shape.intermediate;
    for (int first = 0; first < shape.groups(); first += kWeightChunk) {
      const int count = std::min(kWeightChunk, shape.groups() - first);
      const HostLayer host = MakeHostLayer(seed + SplitMix64::kGamma * uint64_t(2 * first + int(gemm) + 1), count, n, k);
      MXDIFF_RETURN_IF_ERROR(layer.WriteWeights(gemm, first, host.codes, host.scales));
    }
  }
  return absl::OkStatus();
}

std::string DescribeRoutes(const MoeLayerRoutes& routes) {
  return fmt::format("W13 {}; W2 {}", DescribeRoute(routes.w13), DescribeRoute(routes.w2));
}

// One arm: its own MoeLayer, captured by the bench into one graph of the whole layer.
class LayerArm final : public BenchArm {
 public:
  LayerArm(std::string label, const LayerBenchSpec& spec, const std::vector<LayerInputs>& routings,
           MoeLayerRequest request, cudaStream_t stream, L2Flusher* flusher)
      : label_(std::move(label)), spec_(spec), routings_(routings), request_(request), stream_(stream),
        flusher_(flusher) {}
  ~LayerArm() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }

  absl::Status Init(GemmRunner& runner, int device, uint64_t seed) {
    absl::StatusOr<std::unique_ptr<MoeLayer>> layer =
        MoeLayer::Create(runner, MoeLayerConfig{.shape = spec_.shape, .max_tokens = spec_.tokens, .device = device});
    if (!layer.ok()) return layer.status();
    layer_ = *std::move(layer);
    MXDIFF_RETURN_IF_ERROR(spec_.write_weights ? spec_.write_weights(*layer_)
                                               : WriteGeneratedWeights(*layer_, spec_.shape, seed));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"));
    return CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate");
  }

  // Naive, --first_use=tune: what the arm's first call outside a capture does first.
  std::function<absl::Status()> first_eager_call;

  std::string label() const override { return label_; }
  std::string route() const override { return routes_.empty() ? "(not captured)" : routes_; }

  absl::StatusOr<std::vector<uint16_t>> RunSet(int index) override {
    if (routes_.empty()) MXDIFF_RETURN_IF_ERROR(CaptureLayer());
    if (first_eager_call) {
      const absl::Status tuned = first_eager_call();
      first_eager_call = nullptr;
      MXDIFF_RETURN_IF_ERROR(tuned);
    }
    MXDIFF_RETURN_IF_ERROR(SetInputs(index));
    absl::StatusOr<MoeReplay> replay = layer_->Replay();
    if (!replay.ok()) return absl::Status(replay.status().code(), fmt::format("{}: {}", label_, std::string(replay.status().message())));
    return Output();
  }

  absl::Status WarmUp(int passes) override {
    for (int pass = 0; pass < passes; ++pass) {
      for (int i = 0; i < int(routings_.size()); ++i) {
        MXDIFF_RETURN_IF_ERROR(SetInputs(i));
        MXDIFF_RETURN_IF_ERROR(layer_->EnqueueStages(stream_, kMoeStageAll));
        MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), fmt::format("{} warm-up", label_)));
      }
    }
    return absl::OkStatus();
  }

  // The layer's own Capture (its routes, with the runner's tactics as they are now), then the
  // bench's graph of the whole layer on the bench's stream.
  absl::Status PrepareTiming(int capture_mode, bool launch_once) override {
    MXDIFF_RETURN_IF_ERROR(CaptureLayer());
    MXDIFF_RETURN_IF_ERROR(SetInputs(0));
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureMode(capture_mode)), "begin capture"));
    const absl::Status enqueued = layer_->EnqueueStages(stream_, kMoeStageAll);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (!enqueued.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return absl::Status(enqueued.code(), fmt::format("capture of {}: {}", label_, std::string(enqueued.message())));
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(ended, fmt::format("capture of {}", label_)));
    const cudaError_t instantiated = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    MXDIFF_RETURN_IF_ERROR(CudaStatus(instantiated, "cudaGraphInstantiate"));
    if (!launch_once) return absl::OkStatus();
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"));
    return CudaStatus(cudaStreamSynchronize(stream_), fmt::format("first replay of {}", label_));
  }

  absl::StatusOr<ReplayTime> TimeReplay() override {
    if (exec_ == nullptr) return absl::FailedPreconditionError(fmt::format("{} was not captured", label_));
    last_ = replays_++ % int(routings_.size());
    MXDIFF_RETURN_IF_ERROR(SetInputs(last_));  // waits for its copies: outside the timed events
    if (flusher_ != nullptr) MXDIFF_RETURN_IF_ERROR(flusher_->Flush(stream_));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(start_, stream_), "cudaEventRecord"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(stop_), fmt::format("replay of {}", label_)));
    float milliseconds = 0;
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&milliseconds, start_, stop_), "cudaEventElapsedTime"));
    const double us = double(milliseconds) * 1e3;
    return ReplayTime{.per_call_us = us, .replay_us = us, .calls = 1};
  }

  absl::StatusOr<std::vector<uint16_t>> LastOutput() override { return Output(); }
  int last_set() const override { return last_; }

 private:
  absl::Status CaptureLayer() {
    absl::StatusOr<MoeLayerRoutes> routes = layer_->Capture(request_);
    if (!routes.ok()) return absl::Status(routes.status().code(), fmt::format("{}: {}", label_, std::string(routes.status().message())));
    routes_ = DescribeRoutes(*routes);
    return absl::OkStatus();
  }
  absl::Status SetInputs(int index) {
    const LayerInputs& r = routings_[size_t(index) % routings_.size()];
    // The layer copies on its own stream and waits; the bench's stream must be idle too.
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), label_));
    return layer_->SetInputs(spec_.tokens, r.activations, r.expert_ids, r.weights);
  }
  absl::StatusOr<std::vector<uint16_t>> Output() {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), label_));
    MoeDeviceStages stages;
    MXDIFF_RETURN_IF_ERROR(layer_->ReadStages(stages));
    stages.output.resize(size_t(spec_.tokens) * spec_.shape.hidden);
    return std::move(stages.output);
  }

  std::string label_;
  const LayerBenchSpec& spec_;
  const std::vector<LayerInputs>& routings_;
  MoeLayerRequest request_;
  cudaStream_t stream_;
  L2Flusher* flusher_;
  std::unique_ptr<MoeLayer> layer_;
  std::string routes_;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  int replays_ = 0;
  int last_ = 0;
};

absl::StatusOr<std::unique_ptr<GemmRunner>> CreateRunner(const BenchConfig& config) {
  if (config.first_use == FirstUse::kTable) return GemmRunner::Create(config.device);
  absl::StatusOr<std::unique_ptr<TuneOnFirstUseRunner>> runner = CreateTuneOnFirstUseRunner(
      config.device, {.mode = config.first_use, .fallback = config.first_use_fallback, .capturing = {}});
  if (!runner.ok()) return runner.status();
  return std::unique_ptr<GemmRunner>(*std::move(runner));
}

TransformRequest RequestOf(const ArmSpec& spec) {
  return spec.transform == Transform::kOrdinary ? TransformRequest::kOrdinary : TransformRequest::kFolded;
}

class LayerBench final : public ProtocolRunner {
 public:
  LayerBench(const LayerBenchSpec& spec, const BenchConfig& config, cudaStream_t stream, L2Flusher* flusher,
             NvmlMonitor* monitor)
      : spec_(spec), config_(config), stream_(stream), flusher_(flusher), monitor_(monitor) {}

  absl::StatusOr<ShapeReport> Run();

 private:
  void Log(const std::string& line) const {
    if (config_.log) config_.log(line);
  }
  std::vector<int32_t> DispatchRows() const { return MoeDispatchRowOffsets(spec_.shape, spec_.tokens); }
  int GemmN(MoeGemm gemm) const { return gemm == MoeGemm::kW13 ? spec_.shape.w13_n() : spec_.shape.hidden; }
  int GemmK(MoeGemm gemm) const { return gemm == MoeGemm::kW13 ? spec_.shape.hidden : spec_.shape.intermediate; }

  // GemmRunner::Tune on generated weights of one GEMM's decode dispatch shape (what the layer
  // asks its runner's DefaultTactic for); the runner caches the winner.
  absl::StatusOr<Tactic> TuneGemm(GemmRunner& runner, MoeGemm gemm) const {
    const std::vector<int32_t> rows = DispatchRows();
    const int groups = int(rows.size()) - 1;
    const HostLayer host = MakeHostLayer(config_.seed ^ 0x7E57'0000ull ^ uint64_t(gemm), groups, GemmN(gemm), GemmK(gemm));
    absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared =
        runner.Prepare(groups, GemmN(gemm), GemmK(gemm), host.codes, host.scales);
    if (!prepared.ok()) return prepared.status();
    return runner.Tune(**prepared, rows);
  }
  absl::StatusOr<Tactic> TuneBoth(GemmRunner& runner) const {
    absl::StatusOr<Tactic> w13 = TuneGemm(runner, MoeGemm::kW13);
    absl::StatusOr<Tactic> w2 = w13.ok() ? TuneGemm(runner, MoeGemm::kW2) : w13.status();
    if (!w2.ok()) return w2.status();
    return w13;
  }

  absl::StatusOr<std::unique_ptr<LayerArm>> MakeArm(std::string label, GemmRunner& runner, MoeLayerRequest request,
                                                    const std::vector<LayerInputs>& routings,
                                                    L2Flusher* flusher) const {
    auto arm = std::make_unique<LayerArm>(std::move(label), spec_, routings, request, stream_, flusher);
    MXDIFF_RETURN_IF_ERROR(arm->Init(runner, config_.device, config_.seed));
    return arm;
  }
  MoeLayerRequest Pinned(const ArmSpec& spec) const {
    return MoeLayerRequest{.transform = RequestOf(spec),
                           .policy = spec_.policy,
                           .w13_tactic = spec.tactic.value_or(w13_),
                           .w2_tactic = spec.tactic.value_or(w2_)};
  }

  void Timed(ExperimentReport& e, BenchArm& a, BenchArm& b) const;
  ExperimentReport Paired(Protocol protocol, const ArmSpec& sa, const ArmSpec& sb, Pattern pattern, bool b_first,
                          uint64_t seed) override;
  ExperimentReport Naive(uint64_t seed) override;

  const LayerBenchSpec& spec_;
  const BenchConfig& config_;
  cudaStream_t stream_;
  L2Flusher* flusher_;
  NvmlMonitor* monitor_;
  std::unique_ptr<GemmRunner> runner_;
  std::vector<LayerInputs> routings_;
  Tactic w13_;
  Tactic w2_;
};

void LayerBench::Timed(ExperimentReport& e, BenchArm& a, BenchArm& b) const {
  TimePair(e, a, b, monitor_, TimingConfig(config_, e.pattern, e.seed));
  if (e.error.empty()) Log(TimedSummary(spec_.name, e));
}

ExperimentReport LayerBench::Paired(Protocol protocol, const ArmSpec& sa, const ArmSpec& sb, Pattern pattern,
                                    bool b_first, uint64_t seed) {
  ExperimentReport e = PairedReport(protocol, pattern, seed, sa, sb);
  const bool same = protocol == Protocol::kSameArm;
  e.method = fmt::format(
      "{}each arm its own layer; W13 {} and W2 {} pinned; both arms ran all {} routings once (first use) and their "
      "layer outputs were compared bit for bit; {} warmed ({} passes) and captured first; one layer call per replay, "
      "a new routing each (written outside the timed events); {}",
      same ? "A against a second, independently captured A; " : "", TacticName(w13_), TacticName(w2_),
      routings_.size(), b_first ? "B" : "A", config_.warmup_passes,
      flusher_ != nullptr ? "L2 flushed before each replay" : "no L2 flush");
  Log(fmt::format("{}: {} {}: {} vs {}", spec_.name, ProtocolName(protocol), PatternName(pattern), e.a.label, e.b.label));
  absl::StatusOr<std::unique_ptr<LayerArm>> a = MakeArm(e.a.label, *runner_, Pinned(sa), routings_, flusher_);
  absl::StatusOr<std::unique_ptr<LayerArm>> b =
      a.ok() ? MakeArm(e.b.label, *runner_, Pinned(sb), routings_, flusher_) : a.status();
  if (!b.ok()) {
    e.error = std::string((b.status().message()));
    return e;
  }
  if (!CheckBitsBeforeTiming(e, **a, **b, int(routings_.size()), spec_.shape.hidden, "routing", "layer outputs") ||
      !WarmUpAndPrepare(e, **a, **b, config_.warmup_passes, kCaptureThreadLocal, b_first)) {
    return e;
  }
  Timed(e, **a, **b);
  if (e.error.empty()) CheckLastOutputs(e, **a, **b, spec_.shape.hidden, "routing", "layer outputs",
                                        /*check_unwritten=*/false, /*is_error=*/true);
  return e;
}

ExperimentReport LayerBench::Naive(uint64_t seed) {
  ExperimentReport e = PairedReport(Protocol::kNaive, Pattern::kAbba, seed, config_.a, config_.b);
  Log(fmt::format("{}: naive ABBA ({} on first use): {} vs {}", spec_.name, FirstUseName(config_.first_use), e.a.label,
                  e.b.label));
  const bool shared = config_.first_use == FirstUse::kTune;
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner_a = CreateRunner(config_);
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner_b =
      !runner_a.ok() || shared ? absl::StatusOr<std::unique_ptr<GemmRunner>>(nullptr) : CreateRunner(config_);
  if (!runner_a.ok() || !runner_b.ok()) {
    e.error = std::string((!runner_a.ok() ? runner_a.status() : runner_b.status()).message());
    return e;
  }
  GemmRunner& b_runner = shared ? **runner_a : **runner_b;
  // A's capture is its first use: in tune mode it cannot tune there (DecideFirstUse with
  // capturing), so it gets the fallback; in table mode the table's. B asks its runner afterwards.
  MoeLayerRequest request_a{.transform = RequestOf(config_.a), .policy = FallbackPolicy::kFallback};
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    const Tactic table = (*runner_a)->DefaultTactic(GemmN(gemm), GemmK(gemm), DispatchRows());
    const Tactic first = config_.a.tactic.value_or(
        DecideFirstUse(config_.first_use, std::nullopt, std::nullopt, table, config_.first_use_fallback.value_or(table),
                       /*capturing=*/true)
            .tactic);
    (gemm == MoeGemm::kW13 ? request_a.w13_tactic : request_a.w2_tactic) = first;
  }
  const MoeLayerRequest request_b{.transform = RequestOf(config_.b),
                                  .policy = FallbackPolicy::kFallback,
                                  .w13_tactic = config_.b.tactic,
                                  .w2_tactic = config_.b.tactic};
  const std::vector<LayerInputs> one(routings_.begin(), routings_.begin() + 1);
  absl::StatusOr<std::unique_ptr<LayerArm>> a = MakeArm(e.a.label, **runner_a, request_a, one, nullptr);
  absl::StatusOr<std::unique_ptr<LayerArm>> b = a.ok() ? MakeArm(e.b.label, b_runner, request_b, one, nullptr) : a.status();
  if (!b.ok()) {
    e.error = std::string((b.status().message()));
    return e;
  }
  if (shared) (*a)->first_eager_call = [&] { return TuneBoth(b_runner).status(); };
  absl::StatusOr<NaivePreparation> prepared =
      PrepareNaiveArms(config_.first_use, **a, **b, [&] { return TuneBoth(b_runner); });
  if (!prepared.ok()) {
    e.error = std::string((prepared.status().message()));
    return e;
  }
  e.a.route = prepared->a_route;
  e.b.route = prepared->b_route;
  e.method = fmt::format(
      "the seed's protocol on the layer, {} on first use: A captured at its first use on a fresh runner (no warm-up: "
      "{}), {}, then B captured {} (no warm-up of its own); no tactic pinned; one routing, no flush",
      FirstUseName(config_.first_use), e.a.route, prepared->tuning, shared ? "on the same runner" : "on the tuned runner");
  Timed(e, **a, **b);
  e.bits_equal = true;
  if (e.error.empty()) CheckLastOutputs(e, **a, **b, spec_.shape.hidden, "routing", "layer outputs",
                                        /*check_unwritten=*/false, /*is_error=*/false);
  return e;
}

absl::StatusOr<ShapeReport> LayerBench::Run() {
  ShapeReport report;
  report.shape = ShapeSpec{spec_.name, spec_.shape.hidden, spec_.shape.intermediate, true};
  report.groups = spec_.shape.groups();
  report.rows_per_group = spec_.tokens;
  report.sets = std::max(spec_.routings, 1);
  // Both GEMMs, every expert: packed codes (half a byte per weight) and the prepared fp16 scales
  // of both transforms (two bytes per 32 weights, twice).
  const size_t weights = size_t(spec_.shape.groups()) * (size_t(spec_.shape.w13_n()) * spec_.shape.hidden +
                                                         size_t(spec_.shape.hidden) * spec_.shape.intermediate);
  report.set_bytes = weights / 2 + weights / kBlockK * 2 * 2;
  report.calls_per_replay = 1;
  report.l2_flush_bytes = flusher_ != nullptr ? flusher_->bytes() : 0;
  if (absl::Status valid = ValidateMoeShape(spec_.shape); !valid.ok()) {
    report.error = std::string(valid.message());
    return report;
  }
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner = CreateRunner(config_);
  if (!runner.ok()) return runner.status();
  runner_ = *std::move(runner);
  routings_ = MakeRoutings(spec_.shape, spec_.tokens, spec_.routings, config_.seed ^ 0x1A7E'0000'0000ull);
  if (config_.tactic) {
    w13_ = w2_ = *config_.tactic;
    report.tactic_source = "--tactic";
  } else if (config_.tune) {
    absl::StatusOr<Tactic> w13 = TuneGemm(*runner_, MoeGemm::kW13);
    absl::StatusOr<Tactic> w2 = w13.ok() ? TuneGemm(*runner_, MoeGemm::kW2) : w13.status();
    if (!w2.ok()) {
      report.error = fmt::format("tuning: {}", std::string(w2.status().message()));
      return report;
    }
    w13_ = *w13;
    w2_ = *w2;
    report.tactic_source = "tuned once per GEMM (GemmRunner::Tune)";
  } else {
    w13_ = runner_->DefaultTactic(GemmN(MoeGemm::kW13), GemmK(MoeGemm::kW13), DispatchRows());
    w2_ = runner_->DefaultTactic(GemmN(MoeGemm::kW2), GemmK(MoeGemm::kW2), DispatchRows());
    report.tactic_source = "dispatch table";
  }
  report.tactic = fmt::format("W13 {}, W2 {}", TacticName(w13_), TacticName(w2_));
  if (monitor_ != nullptr) report.clocks = DescribeClocks(*monitor_);
  RunProtocols(config_, *this, report.experiments);
  MXDIFF_RETURN_IF_ERROR(runner_->CheckDevice());
  report.verdict = ShapeVerdict(report.experiments, config_.min_effect_us, config_.a.Label(), config_.b.Label());
  Log(fmt::format("{}: verdict {}", spec_.name, report.verdict.message));
  return report;
}

}  // namespace

LayerBenchSpec LayerSpecFor(const ShapeSpec& shape, int tokens) {
  LayerBenchSpec spec;
  spec.name = shape.name;
  spec.shape.hidden = shape.n;
  spec.shape.intermediate = shape.k;
  spec.tokens = tokens;
  return spec;
}

absl::StatusOr<ShapeReport> RunLayerBench(const LayerBenchSpec& spec, const BenchConfig& config) {
  if (config.a.kind != ArmKind::kBuiltin || config.b.kind != ArmKind::kBuiltin) {
    return absl::InvalidArgumentError("the layer bench times the builtin kernels only (no ext: arm)");
  }
  if (spec.tokens < 1 || spec.tokens > kMaxMoeTokens || spec.tokens * spec.shape.top_k > kMaxMoeEntries) {
    return absl::InvalidArgumentError(fmt::format("layer bench: {} tokens: 1..{} (and tokens x top_k <= {})", spec.tokens,
                                                  kMaxMoeTokens, kMaxMoeEntries));
  }
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(config.device), "cudaSetDevice"));
  cudaStream_t stream = nullptr;
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  std::unique_ptr<L2Flusher> flusher;
  if (config.l2_flush) {
    absl::StatusOr<std::unique_ptr<L2Flusher>> created = L2Flusher::Create(config.device);
    if (!created.ok()) {
      cudaStreamDestroy(stream);
      return created.status();
    }
    flusher = *std::move(created);
  }
  char bus_id[32] = {0};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, config.device) != cudaSuccess) bus_id[0] = '\0';
  std::unique_ptr<NvmlMonitor> monitor;
  if (absl::StatusOr<std::unique_ptr<NvmlMonitor>> opened = NvmlMonitor::Open(bus_id); opened.ok()) {
    monitor = *std::move(opened);
  }
  absl::StatusOr<ShapeReport> report = LayerBench(spec, config, stream, flusher.get(), monitor.get()).Run();
  flusher.reset();
  cudaStreamDestroy(stream);
  return report;
}

}  // namespace mxdiff::bench
