// prepare_stress [--seconds=S] [--streams=N] [--launches=L] [--load=T] [--seed=X]: the stress of
// tests/kernels/prepare_stress.h as a program, so that several processes can share one GPU.
// Exit status 0 every launch equal to the reference, 1 a mismatch, 2 it could not run.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fmt/core.h"
#include "tests/kernels/prepare_stress.h"
#include "tests/kernels/random_layer.h"

int main(int argc, char** argv) {
  mxdiff::testing::PrepareStressOptions options;
  options.rounds = 1;
  options.seconds = 10;
  bool seeded = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t equals = arg.find('=');
    const std::string name(arg.substr(0, equals)), value(equals == arg.npos ? "" : arg.substr(equals + 1));
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || number < 0) {
      fmt::print(stderr, "prepare_stress: '{}' is not --name=NUMBER\n", arg);
      return 2;
    }
    if (name == "--seconds") options.seconds = number;
    else if (name == "--streams" && number >= 1) options.streams = int(number);
    else if (name == "--launches" && number >= 1) options.launches_per_stream = int(number);
    else if (name == "--load") options.load_threads = int(number);
    else if (name == "--seed") options.seed = std::strtoull(value.c_str(), nullptr, 0), seeded = true;
    else {
      fmt::print(stderr, "prepare_stress: unknown or out-of-range flag '{}'\n", arg);
      return 2;
    }
  }
  if (!seeded) options.seed = mxdiff::testing::TestSeed("prepare_stress");
  absl::StatusOr<std::unique_ptr<mxdiff::GemmRunner>> runner = mxdiff::GemmRunner::Create();
  if (!runner.ok()) {
    fmt::print(stderr, "prepare_stress: no GPU: {}\n", runner.status().ToString());
    return 2;
  }
  absl::StatusOr<mxdiff::testing::PrepareStressReport> report = RunPrepareStress(**runner, options);
  if (!report.ok()) {
    fmt::print(stderr, "prepare_stress: seed {}: {}\n", options.seed, report.status().ToString());
    return 2;
  }
  fmt::print("prepare_stress: seed {}: {} rounds, {} launches on {} streams, {} differ from the reference{}{}\n",
             options.seed, report->rounds, report->launches, options.streams, report->mismatched_launches,
             report->first_mismatch.empty() ? "" : "; first: ", report->first_mismatch);
  return report->mismatched_launches == 0 ? 0 : 1;
}
