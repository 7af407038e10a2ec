// Microseconds per call of the real decode shapes, both variants, against two floors measured
// in this binary: bytes moved over the device-to-device copy bandwidth, and the emulated MMA's
// FFMA work over the measured FFMA rate. Weight sets rotate so that L2 (60 MB on the H200)
// cannot hold them; calls are replayed from a CUDA graph, each variant warmed on its own.
//
//   kernel_benchmark [--sets-bytes=BYTES] [--tune]
// Prints one table; exit 1 on any CUDA or runner error. Without a usable CUDA device it says so
// and exits 0 (skipped, like the GPU tests): there is nothing to measure, and nothing failed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fmt/core.h"
#include "kernels/dispatch_table.h"
#include "kernels/gemm_runner.h"
#include "tests/kernels/benchmark_support.h"
#include "tests/kernels/ffma_rate.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

struct Shape {
  const char* name;
  int n;
  int k;
};
constexpr Shape kShapes[] = {
    {"W13 PP2xTP4", 1024, 4096}, {"W2 PP2xTP4", 4096, 512}, {"W13 TP8", 512, 4096}, {"W2 TP8", 4096, 256}};
constexpr int kGroups = 6;

struct Measurement {
  double microseconds;
  Route route;
};

// One graph of `calls` launches cycling through the weight sets; the median of replays.
Measurement TimeCalls(GemmRunner& runner, const std::vector<std::unique_ptr<PreparedLayer>>& sets,
                      const DeviceBatch& batch, const RunRequest& request, cudaStream_t stream) {
  DeviceBatch on_stream = batch;
  on_stream.stream = stream;
  Route route;
  for (const auto& set : sets) route = OrDie(runner.RunOnDevice(*set, on_stream, request), "warm-up");
  BENCH_CUDA(cudaStreamSynchronize(stream));
  const int calls = int(std::max<size_t>(64, sets.size() * 4));
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) {
    absl::StatusOr<Route> captured = runner.RunOnDevice(*sets[i % sets.size()], on_stream, request);
    if (!captured.ok()) {
      fmt::print(stderr, "capture: {}\n", captured.status().ToString());
      std::exit(1);
    }
  }
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> per_call;
  for (int replay = 0; replay < 7; ++replay) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float milliseconds = 0;
    BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
    per_call.push_back(milliseconds * 1e3 / calls);
  }
  BENCH_CUDA(runner.CheckDevice().ok() ? cudaSuccess : cudaErrorUnknown);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Measurement{Median(per_call), route};
}

struct BenchmarkOptions {
  size_t sets_bytes = size_t(256) << 20;  // > 4 x L2
  bool tune = false;
};

// The command line; false on anything else (after the usage line).
bool ParseOptions(int argc, char** argv, BenchmarkOptions& options) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sets-bytes=", 13) == 0) {
      options.sets_bytes = std::strtoull(argv[i] + 13, nullptr, 10);
    } else if (std::strcmp(argv[i], "--tune") == 0) {
      options.tune = true;
    } else {
      fmt::print(stderr, "usage: kernel_benchmark [--sets-bytes=BYTES] [--tune]\n");
      return false;
    }
  }
  return true;
}

// The device's measured rates: the floors of a run.
struct DeviceRates {
  double copy_bytes_per_second;
  double ffma_per_second;
};

// The tactics to time for one shape: the table's, and the tuned one where --tune finds another.
std::vector<Tactic> TacticsToTime(GemmRunner& runner, const Shape& shape, const PreparedLayer& set,
                                  const std::vector<int32_t>& row_offsets, bool tune) {
  const Tactic table_tactic = runner.DefaultTactic(shape.n, shape.k, row_offsets);
  std::vector<Tactic> tactics = {table_tactic};
  if (tune) {
    const Tactic tuned = OrDie(runner.Tune(set, row_offsets), "Tune");
    fmt::print("{}: table {}, tuned {}\n", shape.name, TacticName(table_tactic), TacticName(tuned));
    if (!(tuned == table_tactic)) tactics.push_back(tuned);
  }
  return tactics;
}

// One shape's rows of the table: every tactic to time, both variants, over enough weight sets
// (options.sets_bytes in all) that a call finds none of its weights in L2.
std::string BenchmarkShape(GemmRunner& runner, const Shape& shape, std::mt19937_64& rng,
                           const BenchmarkOptions& options, const DeviceRates& rates, cudaStream_t stream) {
  const std::vector<int> rows(kGroups, 1);
  const RandomLayer base = MakeRandomLayer(rng, shape.n, shape.k, rows, ScaleBytes::kAdmitted);
  const size_t set_bytes = base.codes.size() + base.scales.size() * 2;
  const size_t set_count = std::max<size_t>(4, (options.sets_bytes + set_bytes - 1) / set_bytes);
  std::vector<std::unique_ptr<PreparedLayer>> sets;
  for (size_t s = 0; s < set_count; ++s) {
    const RandomLayer layer = MakeRandomLayer(rng, shape.n, shape.k, rows, ScaleBytes::kAdmitted);
    sets.push_back(OrDie(runner.Prepare(kGroups, shape.n, shape.k, layer.codes, layer.scales), "Prepare"));
  }
  int32_t* device_offsets = nullptr;
  uint16_t* device_activations = nullptr;
  uint16_t* device_output = nullptr;
  BENCH_CUDA(cudaMalloc(&device_offsets, base.row_offsets.size() * sizeof(int32_t)));
  BENCH_CUDA(cudaMalloc(&device_activations, base.activations.size() * sizeof(uint16_t)));
  BENCH_CUDA(cudaMalloc(&device_output, size_t(base.rows()) * shape.n * sizeof(uint16_t)));
  BENCH_CUDA(cudaMemcpy(device_offsets, base.row_offsets.data(), base.row_offsets.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(device_activations, base.activations.data(), base.activations.size() * sizeof(uint16_t),
                        cudaMemcpyHostToDevice));
  const DeviceBatch batch{.row_offsets = base.row_offsets,
                          .device_row_offsets = device_offsets,
                          .activations = device_activations,
                          .output = device_output};
  const std::vector<Tactic> tactics = TacticsToTime(runner, shape, *sets[0], base.row_offsets, options.tune);
  const double bytes = double(set_bytes) + base.activations.size() * 2.0 + double(base.rows()) * shape.n * 2.0;
  const double fmas = double(kGroups) * 8 * shape.n * double(shape.k);  // m8n8k4: 8 rows per group
  const double bytes_floor = bytes / rates.copy_bytes_per_second * 1e6;
  const double ffma_floor = fmas / rates.ffma_per_second * 1e6;
  std::string table;
  for (const Tactic& tactic : tactics) {
    for (TransformRequest variant : {TransformRequest::kOrdinary, TransformRequest::kFolded}) {
      const RunRequest request{.transform = variant, .policy = FallbackPolicy::kFailClosed, .tactic = tactic};
      const Measurement m = TimeCalls(runner, sets, batch, request, stream);
      table += fmt::format("| {} | {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", shape.name,
                           TransformName(m.route.variant), TacticName(tactic), RouteReasonName(m.route.reason),
                           m.microseconds, bytes_floor, ffma_floor, m.microseconds / std::max(bytes_floor, ffma_floor));
    }
  }
  fmt::print("{}: {} weight sets of {:.1f} MB\n", shape.name, set_count, set_bytes * 1e-6);
  cudaFree(device_offsets);
  cudaFree(device_activations);
  cudaFree(device_output);
  return table;
}

int Main(int argc, char** argv) {
  BenchmarkOptions options;
  if (!ParseOptions(argc, argv, options)) return 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress survives a timeout
  absl::StatusOr<std::unique_ptr<GemmRunner>> created = GemmRunner::Create();
  if (!created.ok() && created.status().code() == absl::StatusCode::kUnavailable) {
    fmt::print("kernel_benchmark: skipped: no usable CUDA device ({})\n", created.status().ToString());
    return 0;
  }
  std::unique_ptr<GemmRunner> runner = OrDie(std::move(created), "GemmRunner::Create");
  DeviceRates rates;
  rates.copy_bytes_per_second = MeasureCopyBytesPerSecond();
  rates.ffma_per_second = OrDie(MeasureFfmaPerSecond(), "FFMA rate");
  fmt::print("device {}: copy {:.0f} GB/s (read + write), FFMA {:.1f} T/s\n", runner->DeviceName(),
             rates.copy_bytes_per_second * 1e-9, rates.ffma_per_second * 1e-12);

  std::mt19937_64 rng(TestSeed("kernel_benchmark"));
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::string table =
      "| shape | variant | tactic | route | us/call | bytes floor us | FFMA floor us | us / max floor |\n"
      "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |\n";
  for (const Shape& shape : kShapes) table += BenchmarkShape(*runner, shape, rng, options, rates, stream);
  fmt::print("\n{}", table);
  return 0;
}

}  // namespace
}  // namespace mxdiff::testing

int main(int argc, char** argv) { return mxdiff::testing::Main(argc, argv); }
