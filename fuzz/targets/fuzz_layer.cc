// fuzz_layer (fuzz/checks/layer_target.h): the MoE decode layer captured into a CUDA graph and replayed
// case by case against the reference: its codec (fuzz/formats/layer_case_format.h), check, mutator
// (fuzz/mutators/layer_mutator.h) and initialization. Without a usable GPU (or in a build without CUDA) it
// checks the CPU side of every case and says so once.
#include <cstdlib>
#include <memory>

#include "fmt/core.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/mutators/layer_mutator.h"
#include "fuzz/checks/layer_target.h"
#include "fuzz/driver/target_driver.h"
#include "reference/exit_status.h"

namespace {

using namespace mxdiff::fuzz;

std::unique_ptr<LayerDifferential> differential;

// Only a machine without a usable CUDA device fuzzes the CPU side alone: a GPU that fails the
// guard, or any other device error, stops the target (the campaign reports it).
void Initialize(std::span<const std::string_view> /*args*/) {
  differential = std::make_unique<LayerDifferential>(/*use_device=*/true);
  if (differential->device_available()) {
    fmt::print(stderr, "fuzz_layer: {} calibrated as {}\n{}", differential->device()->name,
               mxdiff::StepModelName(differential->device()->model), differential->device()->report);
    return;
  }
  const absl::Status& why = differential->device().status();
  if (why.code() == absl::StatusCode::kFailedPrecondition) {
    fmt::print(stderr, "fuzz_layer: calibration guard failed, not fuzzing: {}\n", why.ToString());
    std::exit(mxdiff::kExitBadInput);
  }
  if (why.code() != absl::StatusCode::kUnavailable) {
    fmt::print(stderr, "fuzz_layer: the device cannot be used, not fuzzing: {}\n", why.ToString());
    std::exit(mxdiff::kExitBadInput);
  }
  if (GpuRequired()) {
    fmt::print(stderr, "fuzz_layer: MXDIFF_REQUIRE_GPU=1 (a GPU is present) but no device, not fuzzing: {}\n",
               why.ToString());
    std::exit(mxdiff::kExitBadInput);
  }
  fmt::print(stderr, "fuzz_layer: no device ({}): checking the CPU side only\n", why.ToString());
}

CheckResult CheckLayer(const LayerCase& c) { return differential->CheckCase(c); }
constexpr NamedCheck<LayerCase> kChecks[] = {{"layer", CheckLayer}};

InputFindings Check(std::span<const uint8_t> input, bool fresh) {
  if (differential == nullptr) Initialize({});
  if (fresh) differential->ForgetState();
  absl::StatusOr<LayerCase> c = DecodeLayerCase(input);
  if (!c.ok()) return std::nullopt;
  return RunNamedChecks<LayerCase>(kChecks, *c);
}

}  // namespace

MXDIFF_FUZZ_TARGET(fuzz_layer) {
  return FuzzTarget{
      .name = "fuzz_layer",
      .options = {.kind = "gpu", .max_len = 262144, .dictionary = "mxdiff.dict"},
      .format = "layer",
      .decodes = [](std::span<const uint8_t> input) { return DecodeLayerCase(input).ok(); },
      .describe = [](std::span<const uint8_t> input) {
        const absl::StatusOr<LayerCase> c = DecodeLayerCase(input);
        return c.ok() ? DescribeLayerCase(*c) : std::string();
      },
      .check_names = CheckNamesOf(kChecks),
      .check = Check,
      .mutate = [](uint8_t* data, size_t size, size_t max_size, unsigned seed) {
        return MutateEncodedLayerCase(data, size, max_size, seed, kLayerProfile);
      },
      .seed_writer = "mxdiff_layer_seeds",
      .initialize = Initialize,
  };
}
