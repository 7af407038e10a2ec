// Speed of the MoE decode layer per variant, replayed from its CUDA graph, at the real per-rank
// shapes with 256 routed experts + the shared one: microseconds per decode token against the sum
// of its two GEMMs' floors, and the share of the layer's own non-GEMM work (route + gather,
// SwiGLU, weighted sum), measured as the full graph's time minus a graph of the two plain GEMMs
// alone (those of a layer whose routing kernel gathers, launched the same way) on the same
// routing; the ways of gathering (Gather, below) run in the same process.
// Every iteration writes a new routing (64 rotate) into the captured buffers,
// so the routed experts' weights mostly come from HBM, as in decoding (830 MB of weights at
// PP2 x TP4 against a 60 MB L2); only the graph's execution is timed (events around it). The
// route, SwiGLU and combine stages' costs in the chain come from graphs of the chain's prefixes,
// the first of which (W13 alone) is reported too: what W13's own gather and routing cost it.
//
//   moe_layer_benchmark [--benchmark_filter=...] [--benchmark_repetitions=N]
// Without a GPU it says so and exits 0 (it is not a test). Floors as in kernel_benchmark: bytes
// moved over the measured device-to-device copy rate, the emulated m8n8k4's FFMA (8 rows per
// expert tile) over the measured FFMA rate; a GEMM's floor is the larger, the layer's the sum.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "fmt/core.h"
#include "kernels/gemm_runner.h"
#include "kernels/moe_layer.h"
#include "tests/kernels/benchmark_support.h"
#include "tests/kernels/ffma_rate.h"
#include "tests/kernels/moe_layer_support.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

constexpr int kRoutings = 64;

struct Device {
  std::unique_ptr<GemmRunner> runner;
  double copy_rate = 0;  // bytes per second, read + write
  double ffma_rate = 0;  // per second
  cudaStream_t stream = nullptr;
};
Device* device = nullptr;

// One real shape and batch size: a layer captured for exactly that many tokens (a graph per
// batch size, as a decoder keeps them), random weights for every expert, the rotating routings.
struct ShapeSetup {
  MoeShape shape;
  std::unique_ptr<MoeLayer> layer;
  std::vector<MoeInputs> routings;
};

// Where the gather and the routing of W13 happen (MoeLayerConfig): "route" (the routing kernel
// copies the rows), "W13 gathers" (through the routing kernel's schedule), "W13 routes" (W13's
// CTAs schedule the routing themselves; the default at decode sizes).
enum class Gather { kRouteKernel, kW13, kW13Routes };
const char* GatherName(Gather g) {
  return g == Gather::kRouteKernel ? "route" : g == Gather::kW13 ? "W13 gathers" : "W13 routes";
}

ShapeSetup& Setup(const char* name, int intermediate, int tokens, bool dependent_launch, Gather gather) {
  static std::map<std::string, std::unique_ptr<HostMoeWeights>> weights_by_shape;
  static std::map<std::string, std::unique_ptr<ShapeSetup>> setups;
  std::unique_ptr<ShapeSetup>& setup = setups[fmt::format("{}/{}/{}/{}", name, tokens, dependent_launch, int(gather))];
  if (setup != nullptr) return *setup;
  setup = std::make_unique<ShapeSetup>();
  setup->shape = MoeShape{.hidden = 4096, .intermediate = intermediate, .experts = 256, .top_k = 6,
                          .shared_expert = true};
  static FastRng rng(TestSeed("moe_layer_benchmark"));
  std::unique_ptr<HostMoeWeights>& weights = weights_by_shape[name];
  if (weights == nullptr) {
    weights = std::make_unique<HostMoeWeights>(setup->shape);
    weights->Randomize(rng, 0, setup->shape.groups());
  }
  setup->layer = OrDie(MoeLayer::Create(*device->runner, MoeLayerConfig{.shape = setup->shape,
                                                                         .max_tokens = tokens,
                                                                         .dependent_launch = dependent_launch,
                                                                         .gather_in_w13 = gather != Gather::kRouteKernel,
                                                                         .route_in_w13 = gather == Gather::kW13Routes}),
                       "MoeLayer::Create");
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    OrDie(weights->Upload(*setup->layer, gemm, 0, setup->shape.groups()), "WriteWeights");
  }
  for (int r = 0; r < kRoutings; ++r) {
    setup->routings.push_back(MakeInputs(rng, setup->shape, tokens, RoutingKind::kDistinct, 0.0));
  }
  return *setup;
}

// The floor of one GEMM on one routing's schedule.
double GemmFloorSeconds(const MoeShape& shape, const MoeSchedule& schedule, int n, int k) {
  double bytes = 0, ffma = 0;
  for (int g = 0; g < shape.groups(); ++g) {
    const int rows = schedule.row_offsets[g + 1] - schedule.row_offsets[g];
    if (rows == 0) continue;
    bytes += double(n) * k / 2 + double(n) * k / kBlockK * 2;  // codes + prepared fp16 scales
    ffma += double((rows + 7) / 8 * 8) * n * k;
  }
  bytes += double(schedule.rows()) * (double(k) + n) * 2;  // activations in, output out
  return std::max(bytes / device->copy_rate, ffma / device->ffma_rate);
}

struct Result {
  std::string name;
  double layer_us, gemm_us, floor_us;
  int tokens;
  bool dependent_launch;
  Gather gather;
  Route w13, w2;
  double w13_us;  // the graph of W13 alone
  double route_us, swiglu_us, combine_us;  // in the chain
};
std::vector<Result>& Results() {
  static std::vector<Result> results;
  return results;
}

cudaGraphExec_t CaptureStages(MoeLayer& layer, unsigned mask) {
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(device->stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status status = layer.EnqueueStages(device->stream, mask);
  BENCH_CUDA(cudaStreamEndCapture(device->stream, &graph));
  OrDie(status, "EnqueueStages");
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  return exec;
}

double TimeGraph(cudaGraphExec_t exec, cudaEvent_t start, cudaEvent_t stop) {
  BENCH_CUDA(cudaEventRecord(start, device->stream));
  BENCH_CUDA(cudaGraphLaunch(exec, device->stream));
  BENCH_CUDA(cudaEventRecord(stop, device->stream));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float milliseconds = 0;
  BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
  return milliseconds * 1e-3;
}

// Where the non-GEMM time goes: each stage's cost in the chain, as the difference between graphs
// of the chain's prefixes (W13 alone, route + W13, + SwiGLU, + W2; then the full graph).
constexpr int kPrefixCount = 4;
constexpr unsigned kPrefixes[kPrefixCount] = {kMoeStageW13, kMoeStageRoute | kMoeStageW13,
                                              kMoeStageRoute | kMoeStageW13 | kMoeStageSwiglu,
                                              kMoeStageRoute | kMoeStageW13 | kMoeStageSwiglu | kMoeStageW2};

// The two GEMMs' time floor, averaged over the setup's routings.
double MeanGemmFloorSeconds(const ShapeSetup& setup) {
  double floor_seconds = 0;
  for (const MoeInputs& inputs : setup.routings) {
    const MoeSchedule schedule =
        OrDie(ScheduleMoeRouting(setup.shape, MoeRouting{inputs.tokens, inputs.expert_ids, inputs.weights}), "schedule");
    floor_seconds += GemmFloorSeconds(setup.shape, schedule, setup.shape.w13_n(), setup.shape.hidden) +
                     GemmFloorSeconds(setup.shape, schedule, setup.shape.hidden, setup.shape.intermediate);
  }
  return floor_seconds / double(setup.routings.size());
}

// The graphs one benchmark times: the full layer, the GEMMs alone (of `plain`), each prefix.
struct LayerGraphs {
  cudaGraphExec_t full;
  cudaGraphExec_t gemms;
  cudaGraphExec_t prefix[kPrefixCount];
  cudaEvent_t start, stop;
};

// Seconds per run of each graph, one entry per benchmark iteration.
struct LayerTimes {
  std::vector<double> layer, gemms, prefix[kPrefixCount];
};

// One iteration: the full graph on routing i (its time is the iteration's), each prefix on its
// own routing of the rotation (as the GEMMs alone are, for the same reason), then the two GEMMs
// alone (schedule and tile maps written by the routing stage first, untimed) on a routing half
// the rotation away, so that neither graph finds the other's weights in L2.
void TimeIteration(benchmark::State& state, MoeLayer& layer, MoeLayer& plain, const std::vector<MoeInputs>& routings,
                   size_t i, const LayerGraphs& graphs, LayerTimes& times) {
  const MoeInputs& inputs = routings[i % routings.size()];
  OrDie(layer.SetInputs(inputs.tokens, inputs.activations, inputs.expert_ids, inputs.weights), "SetInputs");
  const double layer_seconds = TimeGraph(graphs.full, graphs.start, graphs.stop);
  state.SetIterationTime(layer_seconds);
  times.layer.push_back(layer_seconds);
  for (int p = 0; p < kPrefixCount; ++p) {
    const MoeInputs& other = routings[(i + 2 + 8 * p) % routings.size()];
    OrDie(layer.SetInputs(other.tokens, other.activations, other.expert_ids, other.weights), "SetInputs");
    if ((kPrefixes[p] & kMoeStageRoute) == 0) OrDie(layer.EnqueueStages(device->stream, kMoeStageRoute), "route");
    times.prefix[p].push_back(TimeGraph(graphs.prefix[p], graphs.start, graphs.stop));
  }
  const MoeInputs& next = routings[(i + 1 + routings.size() / 2) % routings.size()];
  OrDie(plain.SetInputs(next.tokens, next.activations, next.expert_ids, next.weights), "SetInputs");
  OrDie(plain.EnqueueStages(device->stream, kMoeStageRoute), "route");
  times.gemms.push_back(TimeGraph(graphs.gemms, graphs.start, graphs.stop));
}

// The medians as the benchmark's counters and label, and as a row of Results().
void Report(benchmark::State& state, const char* name, int tokens, bool dependent_launch, Gather gather,
            const MoeLayerRoutes& routes, double floor_seconds, const LayerTimes& times) {
  const double layer_us = Median(times.layer) * 1e6, gemm_us = Median(times.gemms) * 1e6;
  state.counters["us_per_token"] = layer_us / tokens;
  state.counters["gemm_us"] = gemm_us;
  state.counters["floor_us"] = floor_seconds * 1e6;
  state.counters["non_gemm_share"] = (layer_us - gemm_us) / layer_us;
  double prefix_us[kPrefixCount];
  for (int p = 0; p < kPrefixCount; ++p) prefix_us[p] = Median(times.prefix[p]) * 1e6;
  const double route_us = prefix_us[1] - prefix_us[0], swiglu_us = prefix_us[2] - prefix_us[1],
               combine_us = layer_us - prefix_us[3];
  state.counters["w13_alone_us"] = prefix_us[0];
  state.counters["route_in_chain_us"] = route_us;
  state.counters["swiglu_in_chain_us"] = swiglu_us;
  state.counters["combine_in_chain_us"] = combine_us;
  state.SetLabel(fmt::format("W13 {} {}, W2 {} {}", TransformName(routes.w13.variant), TacticName(routes.w13.tactic),
                             TransformName(routes.w2.variant), TacticName(routes.w2.tactic)));
  Results().push_back(Result{fmt::format("{}", name), layer_us, gemm_us, floor_seconds * 1e6, tokens,
                             dependent_launch, gather, routes.w13, routes.w2, prefix_us[0], route_us, swiglu_us,
                             combine_us});
}

void BM_MoeLayer(benchmark::State& state, const char* name, int intermediate, int tokens, TransformRequest variant,
                 bool dependent_launch, Gather gather) {
  ShapeSetup& setup = Setup(name, intermediate, tokens, dependent_launch, gather);
  MoeLayer& layer = *setup.layer;
  const MoeLayerRequest request{.transform = variant, .policy = FallbackPolicy::kFailClosed};
  const MoeLayerRoutes routes = OrDie(layer.Capture(request), "Capture");
  LayerGraphs graphs;
  graphs.full = CaptureStages(layer, kMoeStageAll);
  // The plain GEMMs come from a layer whose routing kernel gathers (a gathering W13 does more).
  MoeLayer& plain = gather != Gather::kRouteKernel
                        ? *Setup(name, intermediate, tokens, dependent_launch, Gather::kRouteKernel).layer
                        : layer;
  OrDie(plain.Capture(request), "Capture");
  graphs.gemms = CaptureStages(plain, kMoeStageW13 | kMoeStageW2);
  for (int p = 0; p < kPrefixCount; ++p) graphs.prefix[p] = CaptureStages(layer, kPrefixes[p]);
  BENCH_CUDA(cudaEventCreate(&graphs.start));
  BENCH_CUDA(cudaEventCreate(&graphs.stop));
  const std::vector<MoeInputs>& routings = setup.routings;
  const double floor_seconds = MeanGemmFloorSeconds(setup);
  // Warm: every routing once through the full graph.
  for (const MoeInputs& inputs : routings) {
    OrDie(layer.SetInputs(inputs.tokens, inputs.activations, inputs.expert_ids, inputs.weights), "SetInputs");
    TimeGraph(graphs.full, graphs.start, graphs.stop);
  }
  LayerTimes times;
  size_t i = 0;
  for (auto _ : state) TimeIteration(state, layer, plain, routings, i++, graphs, times);
  OrDie(device->runner->CheckDevice(), "device");
  Report(state, name, tokens, dependent_launch, gather, routes, floor_seconds, times);
  cudaGraphExecDestroy(graphs.full);
  cudaGraphExecDestroy(graphs.gemms);
  for (cudaGraphExec_t exec : graphs.prefix) cudaGraphExecDestroy(exec);
  cudaEventDestroy(graphs.start);
  cudaEventDestroy(graphs.stop);
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner = GemmRunner::Create();
  if (!runner.ok()) {
    fmt::print("moe_layer_benchmark: skipped: no CUDA device ({})\n", runner.status().ToString());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  Device state;
  state.runner = *std::move(runner);
  state.copy_rate = MeasureCopyBytesPerSecond();
  state.ffma_rate = OrDie(MeasureFfmaPerSecond(), "FFMA rate");
  BENCH_CUDA(cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking));
  device = &state;
  fmt::print("device {}: copy {:.0f} GB/s (read + write), FFMA {:.1f} T/s\n", state.runner->DeviceName(),
             state.copy_rate * 1e-9, state.ffma_rate * 1e-12);
  struct Shape {
    const char* name;
    int intermediate;
  };
  for (const Shape& shape : {Shape{"PP2xTP4", 512}, Shape{"TP8", 256}}) {
    for (int tokens : {1, 4}) {
      for (TransformRequest variant : {TransformRequest::kOrdinary, TransformRequest::kFolded}) {
        // The defaults where the device has them (dependent launches, W13 routing itself)
        // against W13 gathering through the routing kernel's schedule (ordinary only), the
        // routing kernel gathering, and plain launches.
        std::vector<std::pair<Gather, bool>> configs = {
            {Gather::kW13Routes, true}, {Gather::kRouteKernel, true}, {Gather::kW13Routes, false}};
        if (variant == TransformRequest::kOrdinary) configs.push_back({Gather::kW13, true});
        for (const auto& [gather, dependent_launch] : configs) {
          benchmark::RegisterBenchmark(fmt::format("MoeLayer/{}/tokens:{}/{}/gather:{}/{}", shape.name, tokens,
                                                   TransformRequestName(variant), GatherName(gather),
                                                   dependent_launch ? "dependent" : "plain")
                                           .c_str(),
                                       BM_MoeLayer, shape.name, shape.intermediate, tokens, variant, dependent_launch,
                                       gather)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond)
              ->Iterations(1000);
        }
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fmt::print(
      "\n| shape | tokens | gather | launch | W13 | W2 | layer us (median) | us/token | GEMMs us | non-GEMM us | "
      "non-GEMM share | W13 alone us | route / SwiGLU / combine in the chain us | sum of GEMM floors us | layer / floors |\n"
      "| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Result& r : Results()) {
    fmt::print("| {} | {} | {} | {} | {} {} | {} {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f}% | {:.2f} | {:.2f} / {:.2f} / {:.2f} "
               "| {:.2f} | {:.1f} |\n",
               r.name, r.tokens, GatherName(r.gather), r.dependent_launch ? "dependent" : "plain",
               TransformName(r.w13.variant), TacticName(r.w13.tactic), TransformName(r.w2.variant),
               TacticName(r.w2.tactic), r.layer_us, r.layer_us / r.tokens, r.gemm_us, r.layer_us - r.gemm_us,
               100.0 * (r.layer_us - r.gemm_us) / r.layer_us, r.w13_us, r.route_us, r.swiglu_us, r.combine_us, r.floor_us,
               r.layer_us / r.floor_us);
  }
  cudaStreamDestroy(state.stream);
  device = nullptr;
  return 0;
}

}  // namespace
}  // namespace mxdiff::testing

int main(int argc, char** argv) { return mxdiff::testing::Main(argc, argv); }
