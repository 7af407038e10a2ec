// fuzz_gemm's execution rate without libFuzzer around it: each iteration decodes one input
// into the reused case (with the materialization memo, as fuzz/driver/target_driver.cc does) and runs
// every check over every loaded module (the builtin kernels where a GPU exists, modules chosen
// by MXDIFF_MODULES / MXDIFF_DISABLE_MODULES / MXDIFF_EXTERNAL as for fuzz_gemm). Not a test:
//   build/tests/fuzz/fuzz_gemm_benchmark [--benchmark_filter=...]
// items_per_second is executions per second of one worker; the <phase>_ms counters say where an
// execution's time went (gemm_differential.h's Phase). The campaign's table
// (tools/campaign) gives the same rate with libFuzzer's own work included. The oracle is fuzz_gemm's:
// the device reference for large cases, 1 in MXDIFF_CPU_CHECK_EVERY (16) also on the CPU (0: the
// CPU reference alone, the rate before issue 19). Each input is decoded as fuzz_gemm decodes it
// (DecodeForDifferential: a large recipe case's codes stay off the host unless a CPU check needs
// them); MXDIFF_BENCH_HOST_CODES=1 materializes every tensor on the host as before (the host path).
//
//   small        cases of kGemmProfile.small, as the mutator makes them (a new case each time)
//   w13_6x1      W13 PP2xTP4 (N 1024, K 4096), 6 experts x 1 row: each input moves the
//                overrides and reseeds the activations, keeping the layer's generators (what
//                most mutations of such a case do)
//   w13_6x1_new_weights   the same with new weight seeds every input (nothing to reuse)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "fmt/core.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/mutators/case_mutator.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/modules/module_loader.h"
#include "reference/checkpoint_scales.h"
#include "fuzz/modules/reference_oracle.h"
#include "fuzz/driver/target_driver.h"
#include "reference/decode_shapes.h"

namespace mxdiff::fuzz {
namespace {

GemmDifferential* differential = nullptr;

std::vector<std::vector<uint8_t>> SmallInputs() {
  CaseRng rng(1);
  std::vector<std::vector<uint8_t>> inputs;
  FuzzCase c = RandomCase(rng, kGemmProfile);
  while (inputs.size() < 512) {
    MutateCase(c, rng, kGemmProfile);
    const bool small = c.groups <= kGemmProfile.small.max_groups && c.n <= kGemmProfile.small.max_n &&
                       c.k <= kGemmProfile.small.max_k && c.rows() <= kGemmProfile.small.max_rows;
    if (!small) {
      c = RandomCase(rng, kGemmProfile);
      continue;
    }
    inputs.push_back(*EncodeCase(c));
  }
  return inputs;
}

std::vector<std::vector<uint8_t>> W13Inputs(bool new_weights) {
  FuzzCase c;
  c.groups = kTopK;
  c.n = kW13Tp4.n;
  c.k = kW13Tp4.k;
  c.row_offsets = {0, 1, 2, 3, 4, 5, 6};
  c.tactic = Tactic{8, 128, 64, 16, 0};
  CaseRng rng(2);
  std::vector<std::vector<uint8_t>> inputs;
  for (uint64_t i = 0; i < 64; ++i) {
    const uint64_t weights_seed = new_weights ? 100 + i : 100;
    c.recipe(TensorKind::kActivations) = TensorRecipe{ValueClass::kNormal, 0, i, {}};
    c.recipe(TensorKind::kCodes) =
        TensorRecipe{ValueClass::kUniform, 0, weights_seed,
                     {{uint32_t(rng() % c.element_count(TensorKind::kCodes)), uint16_t(rng() % 16)}}};
    c.recipe(TensorKind::kScales) =
        TensorRecipe{ValueClass::kCheckpoint, 0, weights_seed + 1,
                     {{uint32_t(rng() % c.element_count(TensorKind::kScales)), CheckpointScaleOf(rng())}}};
    inputs.push_back(*EncodeCase(c));
  }
  return inputs;
}

void RunInputs(benchmark::State& state, const std::vector<std::vector<uint8_t>>& inputs) {
  FuzzCase c;
  MaterializationMemo memo;
  size_t next = 0;
  const DifferentialCounters before = differential->counters();
  for (auto _ : state) {
    const std::vector<uint8_t>& input = inputs[next++ % inputs.size()];
    static const bool host_codes = [] {
      const char* value = std::getenv("MXDIFF_BENCH_HOST_CODES");
      return value != nullptr && std::string(value) == "1";
    }();
    absl::Status status;
    {
      PhaseTimer timer(differential->decode_seconds());
      status = host_codes ? DecodeCaseInto(input, c, Materialize::kYes, &memo)
                          : DecodeForDifferential(input, *differential, c, &memo).status();
    }
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    if (CheckResult finding = differential->CheckCase(c, input)) {
      state.SkipWithError(fmt::format("finding {}: {}", finding->signature, finding->description).c_str());
      return;
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  // Milliseconds per execution in each phase (the rest is decoding's caller and the checks).
  for (size_t phase = 0; phase < kPhaseCount; ++phase) {
    state.counters[fmt::format("{}_ms", kPhaseNames[phase])] =
        1e3 * (differential->counters().seconds[phase] - before.seconds[phase]) / double(state.iterations());
  }
  state.counters["modules"] = double(differential->modules().size());
}

void Small(benchmark::State& state) { RunInputs(state, SmallInputs()); }
void W13(benchmark::State& state) { RunInputs(state, W13Inputs(false)); }
void W13NewWeights(benchmark::State& state) { RunInputs(state, W13Inputs(true)); }

BENCHMARK(Small)->Name("small")->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(3);
BENCHMARK(W13)->Name("w13_6x1")->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);
BENCHMARK(W13NewWeights)->Name("w13_6x1_new_weights")->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

}  // namespace
}  // namespace mxdiff::fuzz

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  absl::StatusOr<mxdiff::fuzz::LoadedModules> loaded =
      mxdiff::fuzz::LoadModules(mxdiff::fuzz::ModuleSelectionFromArgs({}));
  if (!loaded.ok()) {
    fmt::print(stderr, "fuzz_gemm_benchmark: {}\n", loaded.status().ToString());
    return 2;
  }
  fmt::print(stderr, "fuzz_gemm_benchmark: {}", loaded->report);
  if (loaded->modules.empty()) fmt::print(stderr, "fuzz_gemm_benchmark: no kernel module: the CPU side only\n");
  // The oracle as fuzz_gemm's: the device reference for large cases where there is one, 1 in
  // MXDIFF_CPU_CHECK_EVERY (default 16; 0: the CPU reference alone) also on the CPU.
  mxdiff::fuzz::OracleSettings settings;
  if (const char* every = std::getenv("MXDIFF_CPU_CHECK_EVERY")) settings.cpu_check_every = std::atoi(every);
  std::unique_ptr<mxdiff::fuzz::ReferenceOracle> oracle;
  if (settings.cpu_check_every > 0) {
    absl::StatusOr<std::unique_ptr<mxdiff::fuzz::ReferenceOracle>> made =
        mxdiff::fuzz::MakeDeviceReferenceOracle();
    if (made.ok()) oracle = *std::move(made);
  }
  fmt::print(stderr, "fuzz_gemm_benchmark: oracle: {} (cpu check every {})\n",
             oracle ? "the device reference for large cases" : "the CPU reference", settings.cpu_check_every);
  mxdiff::fuzz::GemmDifferential gemm_differential(std::move(loaded->modules), std::move(oracle), settings);
  const char* host_codes = std::getenv("MXDIFF_BENCH_HOST_CODES");
  fmt::print(stderr, "fuzz_gemm_benchmark: codes: {}\n",
             host_codes != nullptr && std::string(host_codes) == "1"
                 ? "every case's on the host (MXDIFF_BENCH_HOST_CODES=1)"
                 : "as fuzz_gemm decodes (the device way skips them on the host where no CPU check needs them)");
  mxdiff::fuzz::differential = &gemm_differential;
  benchmark::RunSpecifiedBenchmarks();
  fmt::print(stderr, "fuzz_gemm_benchmark: counters:\n{}", mxdiff::fuzz::CountersText(gemm_differential.counters()));
  benchmark::Shutdown();
  return 0;
}
