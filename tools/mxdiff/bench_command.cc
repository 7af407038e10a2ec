// `mxdiff bench`: times two arms against each other on a GPU so that attribution is right:
// pinned tactic, independent warm-up and capture per arm, weight sets rotated and L2 flushed,
// A B B A rounds timed by device events, outputs compared bit for bit first, a bootstrap
// interval with a noise-based stop, NVML clocks with throttled rounds left out, and the A/A and
// B A A B controls always; --naive shows the seed's flawed protocol beside it. The method is
// tools/bench/bench_driver.h; the statistics tools/bench/ (CUDA-free).
//
//   mxdiff bench [--arms=ordinary,folded] [--shapes=w13-tp4,w2-tp4,w13-tp8,w2-tp8] [--naive]
//                [--json=FILE] [--csv=FILE] [--budget_s=10] [--target_pct=0.2] ...
//
// Exit status: 0 every shape got a verdict (faster, slower or unresolved); 1 a bit mismatch or
// a failed control (too noisy, position effect); 2 bad input, no GPU, or a measurement that
// could not run.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "fmt/core.h"
#include "reference/step_model.h"
#include "tools/bench/bench_spec.h"
#include "tools/bench/report.h"
#include "tools/mxdiff/commands.h"

#if MXDIFF_HAVE_CUDA
#include "kernels/tune_on_first_use.h"
#include "tools/bench/bench_driver.h"
#include "tools/mxdiff/gpu_presence.h"
#endif

ABSL_FLAG(std::string, arms, "ordinary,folded",
          "bench: the two arms A,B: ordinary, folded, ordinary@TACTIC, folded@TACTIC, ext:LIBRARY, ext-folded:LIBRARY");
ABSL_FLAG(std::string, shapes, "",
          "bench: comma-separated shapes: w13-tp4, w2-tp4, w13-tp8, w2-tp8, NxK, or the whole MoE layer layer-tp4, "
          "layer-tp8 (us per layer call; --rows is then the tokens per call); empty: the four decode shapes");
ABSL_FLAG(int, experts, 6, "bench: experts (groups) per call");
ABSL_FLAG(int, rows, 1, "bench: rows (tokens) per expert");
ABSL_FLAG(std::string, tactic, "", "bench: pin this tactic for both arms, e.g. 8x128x64/s16; empty: the dispatch table's");
ABSL_FLAG(bool, tune, false, "bench: choose the pinned tactic once with GemmRunner::Tune instead of the table");
ABSL_FLAG(bool, naive, false, "bench: also run the seed's flawed protocol, beside the sound one");
ABSL_FLAG(std::string, first_use, "table",
          "bench: runner mode: table (a call without a tactic gets the dispatch table's) or tune (its first call "
          "outside a capture tunes the shape, as the seed's engine did; kernels/tune_on_first_use.h)");
ABSL_FLAG(std::string, first_use_fallback, "generic",
          "bench: with --first_use=tune, what a first use inside a capture runs: generic (8x128x64/s1), table, or a "
          "TACTIC");
ABSL_FLAG(double, target_pct, 0.2, "bench: stop when the 95% CI half-width is below this % of A's median");
ABSL_FLAG(double, budget_s, 10, "bench: time budget per measurement (sound, swapped, A/A, naive), seconds");
ABSL_FLAG(double, min_effect_us, 0, "bench: a verdict needs |B - A| beyond this many us as well as beyond the A/A interval");
ABSL_FLAG(int, min_rounds, 30, "bench: rounds before the interval may stop a measurement");
ABSL_FLAG(int, max_rounds, 100000, "bench: rounds at most per measurement");
ABSL_FLAG(int, bootstrap, 10000, "bench: bootstrap resamples of the final interval");
ABSL_FLAG(uint64_t, bench_seed, 0, "bench: seed of the weights, activations and bootstrap (0: a fresh one, printed)");
ABSL_FLAG(int, sets_mb, 256, "bench: weight sets per shape worth at least this many MB (L2 is 60 MB on an H200)");
ABSL_FLAG(int, calls, 0, "bench: calls per timed replay (0: the smallest multiple of the set count >= 32)");
ABSL_FLAG(bool, l2_flush, true, "bench: flush L2 before every replay (outside the timed events)");
ABSL_FLAG(int, warmup, 2, "bench: warm-up passes over the sets per arm before its capture");
ABSL_FLAG(std::string, json, "", "bench: write the whole report (samples included) as JSON to this file");
ABSL_FLAG(std::string, csv, "", "bench: write the raw samples (one row per timed replay) as CSV to this file");
ABSL_FLAG(std::string, ext_model, "sm90-emulated", "bench: step model an external kernel arm computes");
ABSL_FLAG(int, device, 0, "bench: CUDA device");

namespace mxdiff::cli {

#if !MXDIFF_HAVE_CUDA

int BenchCommand(std::span<const std::string_view>) {
  fmt::print(stderr,
             "mxdiff bench: needs a CUDA build and a GPU; this build has no CUDA (configure where nvcc is found, "
             "MXDIFF_CUDA=ON)\n");
  return kExitBadInput;
}

#else

namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) {
    fmt::print(stderr, "mxdiff bench: cannot write {}\n", path);
    return false;
  }
  return true;
}

// The arms, shapes, pinned tactic, external model and runner mode: what the flags choose.
absl::Status ParseChoices(bench::BenchConfig& config) {
  const absl::StatusOr<std::pair<bench::ArmSpec, bench::ArmSpec>> arms = bench::ParseArmPair(absl::GetFlag(FLAGS_arms));
  const absl::StatusOr<std::vector<bench::ShapeSpec>> shapes = bench::ParseShapes(absl::GetFlag(FLAGS_shapes));
  for (const absl::Status& status : {arms.status(), shapes.status()}) {
    if (!status.ok()) return status;
  }
  config.a = arms->first;
  config.b = arms->second;
  config.shapes = *shapes;
  for (const bench::ShapeSpec& shape : config.shapes) {
    if (shape.layer && (config.a.kind == bench::ArmKind::kExternal || config.b.kind == bench::ArmKind::kExternal)) {
      return absl::InvalidArgumentError(fmt::format("shape '{}' is the whole MoE layer: it times builtin arms only",
                                                    shape.name));
    }
  }
  if (const std::string tactic = absl::GetFlag(FLAGS_tactic); !tactic.empty()) {
    absl::StatusOr<Tactic> parsed = bench::ParseTactic(tactic);
    if (!parsed.ok()) return absl::InvalidArgumentError(fmt::format("--tactic: {}", std::string(parsed.status().message())));
    config.tactic = *parsed;
  }
  config.tune = absl::GetFlag(FLAGS_tune);
  if (config.tactic && config.tune) {
    return absl::InvalidArgumentError("--tactic and --tune both choose the pinned tactic: give one");
  }
  const std::optional<StepModel> model = ParseStepModel(absl::GetFlag(FLAGS_ext_model));
  if (!model) {
    return absl::InvalidArgumentError(fmt::format(
        "unknown --ext_model '{}' (v100, sm90-emulated, sm90-emulated-ftz or exact)", absl::GetFlag(FLAGS_ext_model)));
  }
  config.ext_model = *model;
  const std::optional<FirstUse> first_use = ParseFirstUse(absl::GetFlag(FLAGS_first_use));
  if (!first_use) {
    return absl::InvalidArgumentError(
        fmt::format("unknown --first_use '{}' (table or tune)", absl::GetFlag(FLAGS_first_use)));
  }
  config.first_use = *first_use;
  if (const std::string fallback = absl::GetFlag(FLAGS_first_use_fallback); fallback == "table") {
    config.first_use_fallback = std::nullopt;
  } else if (fallback != "generic") {
    absl::StatusOr<Tactic> parsed = bench::ParseTactic(fallback);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("--first_use_fallback: {} (generic, table or a tactic)", std::string(parsed.status().message())));
    }
    config.first_use_fallback = *parsed;
  }
  return absl::OkStatus();
}

// The numeric flags into `config`; the first one out of range, or "".
std::string ReadNumbers(bench::BenchConfig& config) {
  config.groups = absl::GetFlag(FLAGS_experts);
  config.rows_per_group = absl::GetFlag(FLAGS_rows);
  config.naive = absl::GetFlag(FLAGS_naive);
  config.min_effect_us = absl::GetFlag(FLAGS_min_effect_us);
  config.stopping = bench::StoppingRule{.target_relative_half_width = absl::GetFlag(FLAGS_target_pct) / 100,
                                        .min_rounds = absl::GetFlag(FLAGS_min_rounds),
                                        .max_rounds = absl::GetFlag(FLAGS_max_rounds),
                                        .budget_seconds = absl::GetFlag(FLAGS_budget_s)};
  config.resamples = absl::GetFlag(FLAGS_bootstrap);
  config.calls = absl::GetFlag(FLAGS_calls);
  config.l2_flush = absl::GetFlag(FLAGS_l2_flush);
  config.warmup_passes = absl::GetFlag(FLAGS_warmup);
  config.device = absl::GetFlag(FLAGS_device);
  const int sets_mb = absl::GetFlag(FLAGS_sets_mb);
  config.sets_bytes = size_t(std::max(sets_mb, 0)) << 20;
  return config.groups < 1 || config.groups > 256                       ? "--experts must be 1..256"
         : config.rows_per_group < 1 || config.rows_per_group > 4096    ? "--rows must be 1..4096"
         : !(config.stopping.target_relative_half_width > 0)            ? "--target_pct must be > 0"
         : !(config.stopping.budget_seconds > 0)                        ? "--budget_s must be > 0"
         : !(config.min_effect_us >= 0 && config.min_effect_us < 1e6)   ? "--min_effect_us must be 0..1e6"
         : config.stopping.min_rounds < 2                               ? "--min_rounds must be >= 2"
         : config.stopping.max_rounds < config.stopping.min_rounds      ? "--max_rounds must be >= --min_rounds"
         : config.resamples < 100                                       ? "--bootstrap must be >= 100"
         : sets_mb < 0 || sets_mb > 65536                               ? "--sets_mb must be 0..65536"
         : config.calls < 0 || config.calls > 100000                    ? "--calls must be 0..100000"
         : config.warmup_passes < 0 || config.warmup_passes > 1000      ? "--warmup must be 0..1000"
                                                                        : "";
}

// The command that replays this run (every flag that changes it, the seed included).
std::string ReplayCommand(const bench::BenchConfig& config) {
  return fmt::format("mxdiff bench --arms={} --shapes={} --experts={} --rows={}{}{}{} --target_pct={} "
                     "--budget_s={} --min_effect_us={} --min_rounds={} --max_rounds={} --bootstrap={} --sets_mb={} "
                     "--calls={} --{}l2_flush --warmup={} --first_use={} --first_use_fallback={} --bench_seed={}",
                     absl::GetFlag(FLAGS_arms), absl::GetFlag(FLAGS_shapes), config.groups, config.rows_per_group,
                     config.tactic ? " --tactic=" + TacticName(*config.tactic) : "", config.tune ? " --tune" : "",
                     config.naive ? " --naive" : "", absl::GetFlag(FLAGS_target_pct), config.stopping.budget_seconds,
                     config.min_effect_us, config.stopping.min_rounds, config.stopping.max_rounds, config.resamples,
                     absl::GetFlag(FLAGS_sets_mb), config.calls, config.l2_flush ? "" : "no", config.warmup_passes,
                     FirstUseName(config.first_use), absl::GetFlag(FLAGS_first_use_fallback), config.seed);
}

// The exit status the shapes' verdicts give (the header's contract).
int ExitStatusOf(const bench::BenchReport& report) {
  int status = kExitOk;
  for (const bench::ShapeReport& shape : report.shapes) {
    switch (shape.verdict.verdict) {
      case bench::Verdict::kFaster:
      case bench::Verdict::kSlower:
      case bench::Verdict::kUnresolved:
        break;
      case bench::Verdict::kBitMismatch:
      case bench::Verdict::kTooNoisy:
      case bench::Verdict::kPositionEffect:
        status = std::max(status, kExitCheckFailed);
        break;
      case bench::Verdict::kIncomplete:
        status = kExitBadInput;
        break;
    }
  }
  return status;
}

}  // namespace

int BenchCommand(std::span<const std::string_view> args) {
  if (!args.empty()) {
    fmt::print(stderr, "mxdiff bench: unexpected argument '{}' (it takes flags only)\n", args[0]);
    return kExitBadInput;
  }
  bench::BenchConfig config;
  if (absl::Status status = ParseChoices(config); !status.ok()) {
    fmt::print(stderr, "mxdiff bench: {}\n", std::string(status.message()));
    return kExitBadInput;
  }
  if (const std::string problem = ReadNumbers(config); !problem.empty()) {
    fmt::print(stderr, "mxdiff bench: {}\n", problem);
    return kExitBadInput;
  }
  if (absl::Status gpu = RequireGpu(config.device); !gpu.ok()) {  // before any output: no GPU is one line
    fmt::print(stderr, "mxdiff bench: {}\n", std::string(gpu.message()));
    return kExitBadInput;
  }
  config.seed = absl::GetFlag(FLAGS_bench_seed);
  if (config.seed == 0) config.seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  config.command = ReplayCommand(config);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress survives a timeout
  fmt::print("bench: seed {} (replay with --bench_seed={})\n", config.seed, config.seed);
  const auto start = std::chrono::steady_clock::now();
  config.log = [start](const std::string& line) {
    fmt::print("[{:7.1f} s] {}\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
               line);
  };
  const absl::StatusOr<bench::BenchReport> report = bench::RunBench(config);
  if (!report.ok()) {
    fmt::print(stderr, "mxdiff bench: {}\n", report.status().ToString());
    return kExitBadInput;
  }
  fmt::print("\n{}", bench::ReportTable(*report));
  bool written = true;
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) written &= WriteFile(path, bench::ReportJson(*report));
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) written &= WriteFile(path, bench::SamplesCsv(*report));
  if (!written) return kExitBadInput;
  return ExitStatusOf(*report);
}

#endif  // MXDIFF_HAVE_CUDA

}  // namespace mxdiff::cli
