// How long decoding a recipe-described case takes (materialization included), with the
// buffers reused as the fuzz loop reuses them. Not a test: run by hand.
//   build/tests/fuzz/case_materialize_benchmark
//
// W13 PP2xTP4 (N 1024, K 4096): 6 experts hold 12.6 MB of codes and scales; over 256 experts
// (the real top-6 decode's layer) 570 MB, of which the 6 with rows are what the output reads.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/formats/tensor_recipe.h"
#include "fuzz/mutators/case_mutator.h"

namespace mxdiff::fuzz {
namespace {

std::vector<uint8_t> EncodedW13(int experts, ValueClass codes, ValueClass scales) {
  FuzzCase c;
  c.groups = experts;
  c.n = 1024;
  c.k = 4096;
  c.row_offsets.assign(size_t(experts) + 1, 0);
  for (int g = 0; g < experts; ++g) {
    const bool chosen = experts == kTopK || g % (experts / kTopK) == 0;
    c.row_offsets[g + 1] = c.row_offsets[g] + (chosen && c.row_offsets[g] < kTopK ? 1 : 0);
  }
  c.tactic = Tactic{8, 128, 64, 16, 0};
  c.recipe(TensorKind::kActivations) = TensorRecipe{ValueClass::kNormal, 0, 1, {}};
  c.recipe(TensorKind::kCodes) = TensorRecipe{codes, 0, 2, {{4095, 7}}};
  c.recipe(TensorKind::kScales) = TensorRecipe{scales, 0, 3, {{127, 129}}};
  return *EncodeCase(c);
}

void DecodeW13(benchmark::State& state, int experts, ValueClass codes, ValueClass scales, int threads) {
  const std::vector<uint8_t> bytes = EncodedW13(experts, codes, scales);
  FuzzCase c;
  if (!DecodeCaseInto(bytes, c, Materialize::kNo).ok()) state.SkipWithError("invalid case");
  for (auto _ : state) {
    if (!DecodeCaseInto(bytes, c, Materialize::kNo).ok()) state.SkipWithError("invalid case");
    MaterializeCase(c, threads);
    benchmark::DoNotOptimize(c.packed_codes.data());
  }
  const double bytes_out = double(c.packed_codes.size() + c.scale_bytes.size() + 2 * c.activations.size());
  state.counters["MB"] = bytes_out / 1e6;
  state.SetBytesProcessed(int64_t(state.iterations() * bytes_out));
  state.SetLabel(std::to_string(bytes.size()) + " bytes on disk, " + std::to_string(c.rows()) + " rows");
}

// The scale bytes alone, one thread: what a case that goes the device way still materializes on
// the host (its codes only on the device), 33.5 MB over 256 W13 experts.
void ScalesW13(benchmark::State& state, int experts, ValueClass scales) {
  std::vector<uint8_t> out(size_t(experts) * 1024 * 4096 / kBlockK);
  const TensorRecipe recipe{scales, 0, 3, {{127, 129}}};
  for (auto _ : state) {
    MaterializeScales(recipe, out, 1);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * out.size()));
}

// Decode alone (what the mutator does for every input): no payload at all.
void DescriptionOnly(benchmark::State& state) {
  const std::vector<uint8_t> bytes = EncodedW13(kRoutedExperts, ValueClass::kUniform, ValueClass::kCheckpoint);
  FuzzCase c;
  for (auto _ : state) {
    if (!DecodeCaseInto(bytes, c, Materialize::kNo).ok()) state.SkipWithError("invalid case");
    benchmark::DoNotOptimize(c.recipes);
  }
}

BENCHMARK_CAPTURE(DecodeW13, w13_6x1_uniform_checkpoint_1thread, kTopK, ValueClass::kUniform,
                  ValueClass::kCheckpoint, 1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(DecodeW13, w13_6x1_uniform_checkpoint_auto, kTopK, ValueClass::kUniform,
                  ValueClass::kCheckpoint, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(DecodeW13, w13_6x1_narrow_normal_1thread, kTopK, ValueClass::kNarrow, ValueClass::kNormal, 1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(DecodeW13, w13_256experts_uniform_checkpoint_1thread, kRoutedExperts, ValueClass::kUniform,
                  ValueClass::kCheckpoint, 1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(DecodeW13, w13_256experts_uniform_checkpoint_auto, kRoutedExperts, ValueClass::kUniform,
                  ValueClass::kCheckpoint, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK_CAPTURE(ScalesW13, w13_256experts_checkpoint_scales, kRoutedExperts, ValueClass::kCheckpoint)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(ScalesW13, w13_256experts_uniform_scales, kRoutedExperts, ValueClass::kUniform)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(DescriptionOnly)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mxdiff::fuzz

BENCHMARK_MAIN();
