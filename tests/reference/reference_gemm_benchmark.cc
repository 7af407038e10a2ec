// The reference GEMM on the decode shapes of docs/numerics.md: shapes (6 groups of one row), per model and
// path, as MAC/s. Not a test: run by hand, e.g.
//   build/tests/reference/reference_gemm_benchmark --benchmark_filter='/fast'
// (/fast is the path kAuto takes, /fast-avx2 the AVX2 flavour, /scalar the definition).
#include <cstdlib>
#include <random>
#include <string>

#include "benchmark/benchmark.h"
#include "reference/reference_gemm.h"
#include "tests/reference/gemm_test_problems.h"

namespace mxdiff {
namespace {

struct Shape {
  const char* name;
  int n;
  int k;
};
// L2: W13 cut to 64 columns, whose weights (768 KB) stay in L2: compute cost without memory.
constexpr Shape kShapes[] = {{"W13", 1024, 4096}, {"W2", 4096, 512}, {"L2", 64, 4096}};

void BM_ReferenceGemm(benchmark::State& state, Shape shape, StepModel model, ReferencePath path) {
  if (path != ReferencePath::kScalar && !ReferenceFastPathAvailable()) {
    state.SkipWithError("no AVX2/FMA: no fast path on this CPU");
    return;
  }
  std::mt19937_64 rng(42);
  testing::OwnedProblem problem =
      testing::RandomProblem(rng, 6, shape.n, shape.k, 1, testing::Values::kModerate);
  problem.row_offsets = {0, 1, 2, 3, 4, 5, 6};  // 6 experts x 1 row: one decode token, top-6
  problem.activations.resize(6 * size_t(shape.k));
  for (size_t i = 0; i < problem.activations.size(); ++i)
    problem.activations[i] = uint16_t(0x3000 + (rng() & 0x83FF));
  ReferenceOptions options;
  options.model = model;
  options.path = path;
  // MXDIFF_BENCH_THREADS=n: the oracle on n threads (default: all hardware threads).
  if (const char* threads = std::getenv("MXDIFF_BENCH_THREADS"); threads != nullptr) options.threads = std::atoi(threads);
  std::vector<uint16_t> output;
  for (auto _ : state) {
    const absl::Status status = ReferenceGemm(problem.View(), options, output);
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(output.data());
  }
  const double macs = 6.0 * shape.n * shape.k;
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterAll() {
  for (const Shape& shape : kShapes) {
    for (StepModel model : kAllStepModels) {
      // fast: what kAuto runs (AVX-512 where the CPU has it); fast-avx2: the AVX2 flavour (the
      // fast path before the AVX-512 one, kept for CPUs without it), for before/after in one run.
      for (ReferencePath path : {ReferencePath::kAuto, ReferencePath::kFastAvx2, ReferencePath::kScalar}) {
        const char* suffix = path == ReferencePath::kScalar    ? "/scalar"
                             : path == ReferencePath::kFastAvx2 ? "/fast-avx2"
                                                                : "/fast";
        const std::string name =
            std::string("Decode/") + shape.name + "/" + std::string(StepModelName(model)) + suffix;
        benchmark::RegisterBenchmark(name.c_str(), BM_ReferenceGemm, shape, model, path)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
}

}  // namespace
}  // namespace mxdiff

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mxdiff::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
