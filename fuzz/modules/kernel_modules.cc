#include "fuzz/modules/kernel_modules.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/modules/device_recipe_weights.h"
#include "reference/device/device_reference.h"
#include "fuzz/mutators/fuzz_rules.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

// One prepared layer per case, shared by every module of the device (a layer runs on any runner
// of its device): preparing is the expensive copy, so it is kept while the next case has the
// same weights.
class KernelSession {
 public:
  explicit KernelSession(std::shared_ptr<GemmRunner> preparer) : preparer_(std::move(preparer)) {}

  void UseDeviceWeights(const DeviceCaseWeights& weights) { device_ = &weights; }

  absl::StatusOr<const PreparedLayer*> Prepare(const FuzzCase& c) {
    // A layer that reads the device's materialization is kept only while nothing rewrote it.
    const bool still_there = borrowed_ == 0 || (device_ != nullptr && device_->materialization == borrowed_);
    if (layer_ != nullptr && prepared_.SameAs(c) && still_there) return layer_.get();
    layer_.reset();
    borrowed_ = 0;
    absl::StatusOr<std::unique_ptr<PreparedLayer>> layer = absl::UnknownError("not prepared");
    if (c.packed_codes.empty() && c.recipe(TensorKind::kCodes)) {
      // The host skipped the weights (the device way): the layer reads the case's device
      // materialization, which the device reference reads too, in place, with the scales
      // prepared and admitted there.
      if (device_ == nullptr || device_->weights == nullptr) {
        return absl::FailedPreconditionError("the case's weights are neither on the host nor on the device");
      }
      const DeviceWeights& weights = *device_->weights;
      layer = preparer_->PrepareOnDeviceWeights(c.groups, c.n, c.k, weights.codes(), weights.scales(),
                                                device_->admission);
      borrowed_ = device_->materialization;
    } else {
      layer = preparer_->Prepare(c.groups, c.n, c.k, c.packed_codes, c.scale_bytes);
    }
    if (!layer.ok()) return layer.status();
    layer_ = *std::move(layer);
    prepared_ = WeightsKey::Of(c);
    return layer_.get();
  }
  void Forget() {
    layer_.reset();
    borrowed_ = 0;
  }

 private:
  // What decides a layer's weights: the shape, and per tensor its recipe (a 570 MB layer is a
  // few hundred bytes of description) or, where it is stored byte by byte, the bytes.
  struct WeightsKey {
    int groups = 0, n = 0, k = 0;
    std::optional<TensorRecipe> codes_recipe, scales_recipe;
    std::vector<uint8_t> codes, scales;

    static WeightsKey Of(const FuzzCase& c) {
      WeightsKey key{c.groups, c.n, c.k, c.recipe(TensorKind::kCodes), c.recipe(TensorKind::kScales), {}, {}};
      if (!key.codes_recipe) key.codes = c.packed_codes;
      if (!key.scales_recipe) key.scales = c.scale_bytes;
      return key;
    }
    bool SameAs(const FuzzCase& c) const {
      return groups == c.groups && n == c.n && k == c.k && codes_recipe == c.recipe(TensorKind::kCodes) &&
             scales_recipe == c.recipe(TensorKind::kScales) && (codes_recipe || codes == c.packed_codes) &&
             (scales_recipe || scales == c.scale_bytes);
    }
  };

  std::shared_ptr<GemmRunner> preparer_;
  // The device's materialization of the case's weights (CaseWeights'), where it was handed over.
  const DeviceCaseWeights* device_ = nullptr;
  std::unique_ptr<PreparedLayer> layer_;
  WeightsKey prepared_;
  size_t borrowed_ = 0;  // the materialization the layer reads; 0: it owns its weights
};

class KernelModule final : public GemmModule {
 public:
  KernelModule(std::shared_ptr<GemmRunner> runner, std::shared_ptr<KernelSession> session, Transform wanted,
               StepModel model, std::string name)
      : runner_(std::move(runner)),
        session_(std::move(session)),
        wanted_(wanted),
        model_(model),
        name_(std::move(name)) {}

  std::string name() const override { return name_; }
  std::optional<StepModel> model() const override { return model_; }

  CaseRun RunCase(const FuzzCase& c, const LayerAdmission& admission, std::span<uint16_t> output,
                  std::span<uint16_t> again_output) override {
    CaseRun run;
    run.tactic = MapTactic(c);
    run.expected = DecideRoute(runner_->registry(), run.tactic, Request(c).transform, c.policy, admission.admitted,
                               admission.Describe());
    run.route = Run(c, run.tactic, output);
    if (!run.route.ok()) return run;
    run.again_tactic = ReorderedTactic(run.tactic);
    run.again = Run(c, run.again_tactic, again_output);
    return run;
  }

  absl::StatusOr<Route> Run(const FuzzCase& c, const Tactic& tactic, std::span<uint16_t> output) override {
    absl::StatusOr<const PreparedLayer*> layer = session_->Prepare(c);
    if (!layer.ok()) return layer.status();
    RunRequest request = Request(c);
    request.tactic = tactic;
    return runner_->Run(**layer, c.row_offsets, c.activations, output, request);
  }

  // A case without its weights on the host is prepared from their device materialization.
  bool TakesRecipeWeights() const override { return true; }
  void UseDeviceWeights(const DeviceCaseWeights& weights) override { session_->UseDeviceWeights(weights); }

  absl::Status CheckHealth() override { return runner_->CheckDevice(); }
  void ForgetState() override { session_->Forget(); }

 private:
  Tactic MapTactic(const FuzzCase& c) const {
    const KernelRegistry& registry = runner_->registry();
    if (registry.Has(c.tactic, Transform::kOrdinary)) return c.tactic;
    return PickBuiltTactic(c.tactic, registry.OrdinaryTactics());
  }

  // The next raster swizzle the registry allows (the same tactic where it allows none): other
  // CTAs share the split-K semaphores at the same time, so a hand-off that depends on timing
  // shows as a difference.
  Tactic ReorderedTactic(const Tactic& tactic) const {
    const int widest = runner_->registry().max_swizzle();
    if (tactic.swizzle > widest || widest == 0) return tactic;
    Tactic reordered = tactic;
    reordered.swizzle = NextSwizzle(tactic.swizzle, widest);
    return reordered;
  }

  // The ordinary module always asks for ordinary; the folded module asks for what the case
  // asks (auto or folded), or folded where the case asks for ordinary.
  RunRequest Request(const FuzzCase& c) const {
    RunRequest request;
    request.policy = c.policy;
    request.transform = wanted_ == Transform::kOrdinary ? TransformRequest::kOrdinary
                        : c.request == TransformRequest::kOrdinary ? TransformRequest::kFolded
                                                                   : c.request;
    return request;
  }

  std::shared_ptr<GemmRunner> runner_;  // its registry routes and launches
  std::shared_ptr<KernelSession> session_;
  Transform wanted_;
  StepModel model_;
  std::string name_;
};

}  // namespace

KernelRegistry PartialFoldedRegistry(const KernelRegistry& full) {
  KernelRegistry partial(full.max_swizzle());
  const std::vector<Tactic> tactics = full.OrdinaryTactics();
  for (size_t i = 0; i < tactics.size(); ++i) {
    partial.Add(tactics[i], Transform::kOrdinary);
    if (i % 2 == 0 && full.Has(tactics[i], Transform::kFolded)) partial.Add(tactics[i], Transform::kFolded);
  }
  return partial;
}

absl::StatusOr<std::vector<std::unique_ptr<GemmModule>>> MakeBuiltinModules(std::shared_ptr<GemmRunner> runner,
                                                                            StepModel device_model, int device) {
  absl::StatusOr<std::unique_ptr<GemmRunner>> partial =
      GemmRunner::CreateWithRegistry(device, PartialFoldedRegistry(runner->registry()));
  if (!partial.ok()) return partial.status();
  auto session = std::make_shared<KernelSession>(runner);  // one copy of each case's layer for all three
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<KernelModule>(runner, session, Transform::kOrdinary, device_model, "ordinary"));
  modules.push_back(std::make_unique<KernelModule>(runner, session, Transform::kFolded, device_model, "folded"));
  // The partial registry's folded module; its ordinary twin would add nothing.
  modules.push_back(std::make_unique<KernelModule>(std::shared_ptr<GemmRunner>(std::move(*partial)), session,
                                                   Transform::kFolded, device_model, "folded-partial"));
  return modules;
}

}  // namespace mxdiff::fuzz
