// The fuzzing part of step 4: `--fuzz-time` seconds of fuzz_layer through the existing campaign
// (tools/campaign/campaign --targets fuzz_layer), where the libFuzzer build (build-fuzz/) is there
// and a device was found. The campaign fuzzes from corpus/fuzz_layer: the real layer's weights
// cannot seed it when the layer exceeds the layer case format (hidden 256, intermediate 128, 16
// experts; DeepSeek V4's does), and the report says so. A finding fails the exactness step; a
// campaign that could not run or did not fuzz is said and leaves the step to the replays.
#include <algorithm>
#include <string>
#include <vector>
#include <filesystem>

#include "fmt/format.h"
#include "fuzz/formats/layer_case_format.h"
#include "tools/cli/child_process.h"
#include "tools/gate/gate_context.h"

namespace mxdiff::gate {
namespace {

std::filesystem::path Repository() {
  if (std::filesystem::exists("tools/campaign/campaign")) return std::filesystem::current_path();
  return MXDIFF_SOURCE_DIR;
}

}  // namespace

FuzzOutcome RunFuzzLayer(const GateContext& context) {
  if (context.options.fuzz_seconds <= 0) return {false, "fuzz_layer: not run (--fuzz-time=0)"};
  const std::filesystem::path repo = Repository();
  const std::filesystem::path campaign = repo / "tools/campaign/campaign";
  const std::filesystem::path build = repo / "build-fuzz";
  if (!std::filesystem::exists(campaign) || !std::filesystem::exists(build / "fuzz/fuzz_layer")) {
    return {false, fmt::format("fuzz_layer: not run: no libFuzzer build ({} is missing; build it as tools/README.md "
                               "says, then the gate runs tools/campaign/campaign --targets fuzz_layer)",
                               (build / "fuzz/fuzz_layer").string())};
  }
  bool fits = true;
  for (const GateLayer& layer : context.layers) {
    const checkpoint::MoeLayerWeights& w = *layer.weights;
    fits &= w.hidden <= fuzz::kLayerMaxHidden && w.intermediate <= fuzz::kLayerMaxIntermediate &&
            w.experts <= fuzz::kLayerMaxExperts;
  }
  const int seconds = std::max(1, int(context.options.fuzz_seconds));
  const std::string out = (std::filesystem::path(context.findings_dir) / "campaign").string();
  // An argument vector, never a shell (the report folder is the user's); --name=VALUE keeps a folder
  // that starts with '-' a value.
  const std::vector<std::string> argv = {campaign.string(), fmt::format("--time={}", seconds), "--targets=fuzz_layer",
                                         "--build-dir=" + build.string(), "--out=" + out};
  const absl::StatusOr<cli::ChildRun> run = cli::RunChild(argv, cli::ChildStderr::kMerged);
  const int exit_status = run.ok() ? run->exit_status : -1;
  const std::string seeded = fits ? "from corpus/fuzz_layer" : "from corpus/fuzz_layer, not seeded with this layer (it exceeds the layer case format)";
  const std::string what = fmt::format("fuzz_layer {} s {} (campaign exit {}; its output in {})", seconds, seeded,
                                       exit_status, out);
  if (exit_status == 1) return {true, fmt::format("{}: FINDINGS", what)};
  if (exit_status == 0) return {false, fmt::format("{}: no finding", what)};
  return {false, fmt::format("{}: did not fuzz, so it decides nothing", what)};
}

}  // namespace mxdiff::gate
