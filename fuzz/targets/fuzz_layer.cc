// fuzz_layer (fuzz/checks/layer_target.h): the MoE decode layer captured into a CUDA graph and replayed
// case by case against the reference: its codec (fuzz/formats/layer_case_format.h), check, mutator
// (fuzz/mutators/layer_mutator.h) and initialization. Without a usable GPU (or in a build without CUDA) it
// checks the CPU side of every case and says so once. Its repro: the case, the device, the check's
// verdict; --emit writes corpus/fuzz_layer/regression-<signature>.<hash>.case; no --minimize, no --json.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "fmt/core.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/mutators/layer_mutator.h"
#include "fuzz/checks/layer_target.h"
#include "fuzz/driver/target_driver.h"
#include "reference/exit_status.h"
#include "reference/hash.h"

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

// repro of a layer case: one layer differential on the device where there is one, kept from case
// to case of a sequence.
class LayerRepro : public ReproSession {
 public:
  explicit LayerRepro(const ReproOptions& options) : ReproSession(options) {}

  absl::StatusOr<std::vector<TargetFinding>> Explain(const std::string& path, std::span<const uint8_t> input) override {
    const absl::StatusOr<LayerCase> c = DecodeLayerCase(input);
    if (!c.ok()) return absl::InvalidArgumentError(fmt::format("{} is not a valid layer case: {}", path, c.status().ToString()));
    fmt::print(options_.text, "{}\n{}", path, DescribeLayerCase(*c));
    LayerDifferential& differential = Differential();
    fmt::print(options_.text, "device: {}\n",
               differential.device_available()
                   ? fmt::format("{} ({})", differential.device()->name, mxdiff::StepModelName(differential.device()->model))
                   : "none (" + differential.device().status().ToString() + "): the CPU side only");
    const std::vector<TargetFinding> found = Check(*c);
    if (!found.empty()) {
      fmt::print(options_.text, "fuzz_layer FINDING {}\n  {}\n", found[0].finding.signature, found[0].finding.description);
    } else {
      fmt::print(options_.text, "fuzz_layer ok ({} replays compared on the device)\n", differential.replays_compared());
    }
    return found;
  }

  std::vector<TargetFinding> Replay(std::span<const uint8_t> input) override {
    const absl::StatusOr<LayerCase> c = DecodeLayerCase(input);
    return c.ok() ? Check(*c) : std::vector<TargetFinding>{};
  }

  // The verdict line above is the last line.
  void Conclude(const std::vector<TargetFinding>& /*findings*/) override {}

 private:
  LayerDifferential& Differential() {  // opened at the first case
    if (!differential_) differential_ = std::make_unique<LayerDifferential>(/*use_device=*/true);
    return *differential_;
  }
  std::vector<TargetFinding> Check(const LayerCase& c) {
    if (CheckResult finding = Differential().CheckCase(c)) return {{"fuzz_layer", *finding}};
    return {};
  }
  std::unique_ptr<LayerDifferential> differential_;
};

// --emit: corpus/fuzz_layer/ (beside the regressions folder) as regression-<signature>.<hash>.case,
// where fuzz_layer_corpus_replay replays it from then on.
absl::StatusOr<std::string> EmitRegression(const FuzzTarget& /*target*/, std::span<const uint8_t> input,
                                           const std::string& /*path*/, const TargetFinding* first,
                                           const std::string& regressions_dir) {
  const std::filesystem::path dir = std::filesystem::path(regressions_dir).parent_path() / "fuzz_layer";
  const std::filesystem::path file =
      dir / fmt::format("regression-{}.{:016x}.case", SignatureStem(first != nullptr ? first->finding.signature : "clean"),
                        mxdiff::Fnv1a64(input));
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(input.data()), std::streamsize(input.size()));
  out.close();  // a write error (a full disk) shows at the flush
  if (!out) return absl::PermissionDeniedError(fmt::format("cannot write {}", file.string()));
  return file.string();
}

}  // namespace

MXDIFF_FUZZ_TARGET(fuzz_layer) {
  return FuzzTarget{
      .name = "fuzz_layer",
      .options = {.kind = "gpu", .max_len = 262144, .dictionary = "mxdiff.dict"},
      .format = "layer",
      .decode = [](std::span<const uint8_t> input) {
        const absl::StatusOr<LayerCase> c = DecodeLayerCase(input);
        return c.ok() ? absl::OkStatus() : absl::InvalidArgumentError("not a valid layer case: " + c.status().ToString());
      },
      .describe = [](std::span<const uint8_t> input) {
        const absl::StatusOr<LayerCase> c = DecodeLayerCase(input);
        return c.ok() ? DescribeLayerCase(*c) : std::string();
      },
      .magic = std::string_view(kLayerCaseMagic, sizeof kLayerCaseMagic),
      .check_names = CheckNamesOf(kChecks),
      .check = Check,
      .mutate = [](uint8_t* data, size_t size, size_t max_size, unsigned seed) {
        return MutateEncodedLayerCase(data, size, max_size, seed, kLayerProfile);
      },
      .seed_writer = "mxdiff_layer_seeds",
      .initialize = Initialize,
      .repro = {.cases = "layer",
                .open = [](const FuzzTarget&, const ReproOptions& options) -> std::unique_ptr<ReproSession> {
                  return std::make_unique<LayerRepro>(options);
                },
                .emit = EmitRegression},
  };
}
