#include "tools/bench/bench_driver.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "fmt/format.h"
#include "kernels/cuda_status.h"
#include "kernels/gemm_runner.h"
#include "kernels/tune_on_first_use.h"
#include "reference/status_macros.h"
#include "tools/bench/bit_compare.h"
#include "tools/bench/device_arms.h"
#include "tools/bench/layer_bench.h"
#include "tools/bench/naive_protocol.h"
#include "tools/bench/nvml_monitor.h"
#include "tools/bench/paired_steps.h"

namespace mxdiff::bench {
namespace {

constexpr int kCaptureThreadLocal = int(cudaStreamCaptureModeThreadLocal);
static_assert(kCaptureModeRelaxed == int(cudaStreamCaptureModeRelaxed));

// A plain runner, or a tune-on-first-use one (kernels/tune_on_first_use.h).
absl::StatusOr<std::unique_ptr<GemmRunner>> CreateRunner(int device, FirstUse mode, std::optional<Tactic> fallback) {
  if (mode == FirstUse::kTable) return GemmRunner::Create(device);
  absl::StatusOr<std::unique_ptr<TuneOnFirstUseRunner>> runner =
      CreateTuneOnFirstUseRunner(device, {.mode = mode, .fallback = fallback, .capturing = {}});
  if (!runner.ok()) return runner.status();
  return std::unique_ptr<GemmRunner>(*std::move(runner));
}

class Stream {
 public:
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  absl::Status Create() {
    return CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  void* get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class ShapeBench final : public ProtocolRunner {
 public:
  ShapeBench(const BenchConfig& config, GemmRunner& runner, void* stream, L2Flusher* flusher, NvmlMonitor* monitor,
             bool host_timing)
      : config_(config),
        runner_(runner),
        stream_(stream),
        flusher_(flusher),
        monitor_(monitor),
        host_timing_(host_timing) {}

  // Errors here are the device's (sticky): the caller stops the whole run.
  absl::StatusOr<ShapeReport> Run(const ShapeSpec& shape) {
    ShapeReport report;
    report.shape = shape;
    name_ = shape.name;
    report.groups = config_.groups;
    report.rows_per_group = config_.rows_per_group;
    const size_t set_bytes = size_t(config_.groups) * shape.n * (shape.k / 2) +
                             size_t(config_.groups) * shape.n * (shape.k / kBlockK) * sizeof(uint16_t);
    const int count =
        int(std::max<size_t>(size_t(config_.min_sets), (config_.sets_bytes + set_bytes - 1) / set_bytes));
    Log(fmt::format("{}: preparing {} weight sets of {:.1f} MB", shape.name, count, set_bytes * 1e-6));
    absl::StatusOr<std::unique_ptr<LayerSets>> sets = LayerSets::Create(
        runner_, config_.groups, config_.rows_per_group, shape.n, shape.k, count, config_.seed, host_timing_);
    if (!sets.ok()) {
      report.error = std::string(sets.status().message());
      return report;
    }
    sets_ = std::move(*sets);
    report.sets = sets_->count();
    report.set_bytes = sets_->set_bytes();
    if (config_.tactic) {
      tactic_ = *config_.tactic;
      report.tactic_source = "--tactic";
    } else if (config_.tune) {
      absl::StatusOr<Tactic> tuned = runner_.Tune(sets_->set(0), sets_->row_offsets());
      if (!tuned.ok()) {
        report.error = fmt::format("tuning: {}", std::string(tuned.status().message()));
        return report;
      }
      tactic_ = *tuned;
      report.tactic_source = "tuned once (GemmRunner::Tune)";
    } else {
      tactic_ = runner_.DefaultTactic(shape.n, shape.k, sets_->row_offsets());
      report.tactic_source = "dispatch table";
    }
    report.tactic = TacticName(tactic_);
    calls_ = config_.calls > 0 ? config_.calls
             : host_timing_    ? count
                               : (std::max(32, count) + count - 1) / count * count;
    report.calls_per_replay = calls_;
    report.l2_flush_bytes = flusher_ != nullptr ? flusher_->bytes() : 0;
    if (monitor_ != nullptr) report.clocks = DescribeClocks(*monitor_);

    RunProtocols(config_, *this, report.experiments);
    MXDIFF_RETURN_IF_ERROR(runner_.CheckDevice());

    report.verdict = ShapeVerdict(report.experiments, config_.min_effect_us, config_.a.Label(), config_.b.Label());
    Log(fmt::format("{}: verdict {}", shape.name, report.verdict.message));
    sets_.reset();
    return report;
  }

 private:
  void Log(const std::string& line) const {
    if (config_.log) config_.log(line);
  }

  absl::StatusOr<std::unique_ptr<BenchArm>> MakeArm(const ArmSpec& spec, const LayerSets& sets,
                                                    std::string label) const {
    if (spec.kind == ArmKind::kExternal) {
      return MakeExternalArm(std::move(label), spec.library, spec.transform, tactic_, config_.ext_model, sets, stream_,
                             calls_, flusher_);
    }
    const RunRequest request{
        .transform = spec.transform == Transform::kOrdinary ? TransformRequest::kOrdinary : TransformRequest::kFolded,
        .policy = FallbackPolicy::kFailClosed,
        .tactic = spec.tactic.value_or(tactic_)};
    if (host_timing_) return MakeHostBuiltinArm(std::move(label), sets, request, stream_, calls_, flusher_);
    return MakeGraphArm(std::move(label), sets, request, stream_, calls_, flusher_);
  }

  void Timed(ExperimentReport& e, BenchArm& a, BenchArm& b) const {
    TimePair(e, a, b, monitor_, TimingConfig(config_, e.pattern, e.seed));
    if (e.error.empty()) Log(TimedSummary(name_, e));
  }

  ExperimentReport Paired(Protocol protocol, const ArmSpec& sa, const ArmSpec& sb, Pattern pattern, bool b_first,
                          uint64_t seed) override {
    ExperimentReport e = PairedReport(protocol, pattern, seed, sa, sb);
    const bool same = protocol == Protocol::kSameArm;
    e.method = fmt::format(
        "{}pinned {}; both arms ran all {} sets once (first use) and were compared bit for bit before timing; {} "
        "warmed ({} passes) and captured first, then {}; {} calls per replay over {} rotating sets; {}",
        same ? "A against a second, independently captured A; " : "", TacticName(tactic_), sets_->count(),
        b_first ? "B" : "A", config_.warmup_passes, b_first ? "A" : "B", calls_, sets_->count(),
        flusher_ != nullptr ? "L2 flushed before each replay" : "no L2 flush");
    Log(fmt::format("{}: {} {}: {} vs {}", name_, ProtocolName(protocol), PatternName(pattern), e.a.label,
                    e.b.label));
    absl::StatusOr<std::unique_ptr<BenchArm>> a = MakeArm(sa, *sets_, e.a.label);
    absl::StatusOr<std::unique_ptr<BenchArm>> b = a.ok() ? MakeArm(sb, *sets_, e.b.label) : a.status();
    if (!b.ok()) {
      e.error = std::string(b.status().message());
      return e;
    }
    // Every first use, and the bit check, before anything is timed.
    if (!CheckBitsBeforeTiming(e, **a, **b, sets_->count(), sets_->n(), "set", "outputs") ||
        !WarmUpAndPrepare(e, **a, **b, config_.warmup_passes, kCaptureThreadLocal, b_first)) {
      return e;
    }
    Timed(e, **a, **b);
    if (e.error.empty()) CheckLastOutputs(e, **a, **b, sets_->n(), "set", "outputs", /*check_unwritten=*/true, /*is_error=*/true);
    return e;
  }

  // kTable: fresh runners, nothing tuned, no workspace; A's runner is never touched after A's
  // capture (its graph holds that runner's workspace), B's runner is the one that is tuned.
  // kTune (`shared`): one fresh tune-on-first-use runner and one weight set for both arms
  // (naive_protocol.h).
  struct NaiveRunners {
    std::unique_ptr<GemmRunner> runner_a;
    std::unique_ptr<GemmRunner> runner_b;  // kTable only
    std::unique_ptr<LayerSets> sets_a;
    std::unique_ptr<LayerSets> sets_b;  // kTable only
  };
  absl::StatusOr<NaiveRunners> MakeNaiveRunners(bool shared) const {
    NaiveRunners made;
    auto one_set = [&](GemmRunner& runner) {
      return LayerSets::Create(runner, config_.groups, config_.rows_per_group, sets_->n(), sets_->k(), 1, config_.seed,
                               false);
    };
    for (int arm = 0; arm < (shared ? 1 : 2); ++arm) {
      absl::StatusOr<std::unique_ptr<GemmRunner>> runner =
          arm == 0 ? CreateRunner(config_.device, config_.first_use, config_.first_use_fallback)
                   : GemmRunner::Create(config_.device);
      if (!runner.ok()) return runner.status();
      absl::StatusOr<std::unique_ptr<LayerSets>> sets = one_set(**runner);
      if (!sets.ok()) return sets.status();
      (arm == 0 ? made.runner_a : made.runner_b) = *std::move(runner);
      (arm == 0 ? made.sets_a : made.sets_b) = *std::move(sets);
    }
    return made;
  }

  ExperimentReport Naive(uint64_t seed) override {
    ExperimentReport e = PairedReport(Protocol::kNaive, Pattern::kAbba, seed, config_.a, config_.b);
    if (host_timing_) {
      e.error = "the naive protocol needs graph arms (not with an external kernel)";
      return e;
    }
    Log(fmt::format("{}: naive ABBA ({} on first use): {} vs {}", name_, FirstUseName(config_.first_use), e.a.label,
                    e.b.label));
    const bool shared = config_.first_use == FirstUse::kTune;
    absl::StatusOr<NaiveRunners> made = MakeNaiveRunners(shared);
    if (!made.ok()) {
      e.error = std::string(made.status().message());
      return e;
    }
    const LayerSets& set_b = shared ? *made->sets_a : *made->sets_b;
    auto request = [](const ArmSpec& spec) {
      return RunRequest{
          .transform = spec.transform == Transform::kOrdinary ? TransformRequest::kOrdinary : TransformRequest::kFolded,
          .policy = FallbackPolicy::kFallback,
          .tactic = spec.tactic};
    };
    // kTune: A's first call outside a capture, and B, run on a second stream: the runner keeps a
    // split-K workspace per stream, so the winner's never replaces the one A's graph holds.
    Stream second;
    if (absl::Status created = shared ? second.Create() : absl::OkStatus(); !created.ok()) {
      e.error = std::string(created.message());
      return e;
    }
    void* stream_b = shared ? second.get() : stream_;
    absl::StatusOr<std::unique_ptr<BenchArm>> a =
        MakeGraphArm(e.a.label, *made->sets_a, request(config_.a), stream_, calls_, nullptr);
    absl::StatusOr<std::unique_ptr<BenchArm>> a_first =
        a.ok() ? MakeGraphArm(e.a.label, *made->sets_a, request(config_.a), stream_b, calls_, nullptr) : a.status();
    absl::StatusOr<std::unique_ptr<BenchArm>> b =
        a_first.ok() ? MakeGraphArm(e.b.label, set_b, request(config_.b), stream_b, calls_, nullptr) : a_first.status();
    if (!b.ok()) {
      e.error = std::string(b.status().message());
      return e;
    }
    absl::StatusOr<NaivePreparation> prepared = PrepareNaiveArms(
        config_.first_use, **a, **b, [&] { return made->runner_b->Tune(set_b.set(0), set_b.row_offsets()); },
        a_first->get());
    if (!prepared.ok()) {
      e.error = std::string(prepared.status().message());
      return e;
    }
    e.a.route = prepared->a_route;
    e.b.route = prepared->b_route;
    e.method = fmt::format(
        "the seed's protocol, {} on first use: A captured at its first use on a fresh runner (no warm-up: {}), {}, "
        "then B captured {} (no warm-up of its own); no tactic pinned; one weight set of {:.1f} MB (fits in L2), no "
        "flush; {} calls per replay",
        FirstUseName(config_.first_use), e.a.route, prepared->tuning, shared ? "on the same runner" : "on the tuned runner",
        sets_->set_bytes() * 1e-6, calls_);
    Timed(e, **a, **b);
    e.bits_equal = true;  // until the comparison after timing says otherwise
    if (e.error.empty()) CheckLastOutputs(e, **a, **b, sets_->n(), "set", "outputs", /*check_unwritten=*/true, /*is_error=*/false);
    return e;
  }

  const BenchConfig& config_;
  GemmRunner& runner_;
  void* stream_;
  L2Flusher* flusher_;
  NvmlMonitor* monitor_;
  bool host_timing_;
  std::unique_ptr<LayerSets> sets_;
  std::string name_;
  Tactic tactic_;
  int calls_ = 0;
};

}  // namespace

void RunProtocols(const BenchConfig& config, ProtocolRunner& runner, std::vector<ExperimentReport>& experiments) {
  uint64_t seed = config.seed;
  experiments.push_back(runner.Paired(Protocol::kSound, config.a, config.b, Pattern::kAbba, false, ++seed));
  const ExperimentReport& sound = experiments.back();
  if (sound.bits_checked && !sound.bits_equal) return;
  experiments.push_back(runner.Paired(Protocol::kSwapped, config.a, config.b, Pattern::kBaab, true, ++seed));
  experiments.push_back(runner.Paired(Protocol::kSameArm, config.a, config.a, Pattern::kAbba, false, ++seed));
  if (config.naive) experiments.push_back(runner.Naive(++seed));
}

ExperimentConfig TimingConfig(const BenchConfig& config, Pattern pattern, uint64_t seed) {
  return ExperimentConfig{.pattern = pattern,
                          .stopping = config.stopping,
                          .check_resamples = config.check_resamples,
                          .resamples = config.resamples,
                          .confidence = config.confidence,
                          .seed = seed};
}

absl::StatusOr<BenchReport> RunBench(const BenchConfig& config) {
  // --first_use=tune: the sound protocol runs on a tune-on-first-use runner too; it pins its
  // tactic, so the mode cannot reach it.
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner =
      CreateRunner(config.device, config.first_use, config.first_use_fallback);
  if (!runner.ok()) return runner.status();
  Stream stream;
  MXDIFF_RETURN_IF_ERROR(stream.Create());
  BenchReport report;
  report.command = config.command;
  report.seed = config.seed;
  report.stopping = config.stopping;
  report.resamples = config.resamples;
  report.confidence = config.confidence;
  int driver = 0;
  int runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  report.device = fmt::format("{} (CUDA driver {}.{}, runtime {}.{})", (*runner)->DeviceName(), driver / 1000,
                              driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);

  char bus_id[32] = {0};
  std::unique_ptr<NvmlMonitor> monitor;
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, config.device) != cudaSuccess) bus_id[0] = '\0';
  if (absl::StatusOr<std::unique_ptr<NvmlMonitor>> opened = NvmlMonitor::Open(bus_id); opened.ok()) {
    monitor = *std::move(opened);
    report.nvml = fmt::format("NVML: {} at {}, clocks and throttle reasons read around every round{}", monitor->name(),
                              bus_id,
                              monitor->reasons_function().empty() ? " (this NVML gives no reasons: nothing discarded)"
                                                                  : "");
  } else {
    report.nvml = fmt::format("{}: clocks not read, no sample flagged as throttled", std::string(opened.status().message()));
  }

  std::unique_ptr<L2Flusher> flusher;
  if (config.l2_flush) {
    absl::StatusOr<std::unique_ptr<L2Flusher>> created = L2Flusher::Create(config.device);
    if (!created.ok()) return created.status();
    flusher = *std::move(created);
  }
  const bool host_timing = config.a.kind == ArmKind::kExternal || config.b.kind == ArmKind::kExternal;
  report.timing = host_timing ? "host calls timed by the steady clock (copies in and out included: an external "
                                "kernel's ABI takes host memory)"
                              : "CUDA graph replays, each between two device events";
  ShapeBench bench(config, **runner, stream.get(), flusher.get(), monitor.get(), host_timing);
  for (const ShapeSpec& shape : config.shapes) {
    absl::StatusOr<ShapeReport> shape_report =
        shape.layer ? RunLayerBench(LayerSpecFor(shape, config.rows_per_group), config) : bench.Run(shape);
    if (!shape_report.ok()) return shape_report.status();
    report.shapes.push_back(*std::move(shape_report));
  }
  return report;
}

}  // namespace mxdiff::bench
