// How fast a layer's scale bytes are admitted (AdmitLayer): fuzz_gemm admits every new layer on
// the host, 33.5 MB for 256 W13 experts at PP2xTP4. Not a test: run by hand.
//   build/tests/reference/admission_benchmark
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "reference/admission.h"

namespace mxdiff {
namespace {

constexpr size_t kW13ScaleBytes = size_t(256) * 1024 * 4096 / 32;

// Checkpoint-like bytes (114..126), every one admitted; `refused_every` > 0 puts a 112 that often.
std::vector<uint8_t> Layer(size_t refused_every) {
  std::vector<uint8_t> bytes(kW13ScaleBytes);
  std::mt19937 random(20261206);
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = refused_every > 0 && i % refused_every == 0 ? 112 : uint8_t(114 + random() % 13);
  }
  return bytes;
}

void Admit(benchmark::State& state, size_t refused_every) {
  const std::vector<uint8_t> bytes = Layer(refused_every);
  for (auto _ : state) benchmark::DoNotOptimize(AdmitLayer(bytes));
  state.SetBytesProcessed(int64_t(state.iterations() * bytes.size()));
}

BENCHMARK_CAPTURE(Admit, w13_256experts_admitted, 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Admit, w13_256experts_refused_1_in_1000, 1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mxdiff

BENCHMARK_MAIN();
