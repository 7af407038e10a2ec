#include "fuzz/modules/kernel_modules.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "kernels/tile_raster.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

// One prepared layer per case, shared by both modules: preparing is the expensive copy.
class KernelSession {
 public:
  explicit KernelSession(std::shared_ptr<GemmRunner> runner) : runner_(std::move(runner)) {}
  GemmRunner& runner() { return *runner_; }

  absl::StatusOr<const PreparedLayer*> Prepare(const FuzzCase& c) {
    if (layer_ != nullptr && prepared_ == c) return layer_.get();
    layer_.reset();
    absl::StatusOr<std::unique_ptr<PreparedLayer>> layer =
        runner_->Prepare(c.groups, c.n, c.k, c.packed_codes, c.scale_bytes);
    if (!layer.ok()) return layer.status();
    layer_ = *std::move(layer);
    prepared_ = c;
    return layer_.get();
  }

 private:
  std::shared_ptr<GemmRunner> runner_;
  std::unique_ptr<PreparedLayer> layer_;
  FuzzCase prepared_;
};

class KernelModule final : public GemmModule {
 public:
  KernelModule(std::shared_ptr<KernelSession> session, Transform wanted, StepModel model, std::string name)
      : session_(std::move(session)), wanted_(wanted), model_(model), name_(std::move(name)) {}

  std::string name() const override { return name_; }
  std::optional<StepModel> model() const override { return model_; }

  Tactic MapTactic(const FuzzCase& c) const override {
    const KernelRegistry& registry = session_->runner().registry();
    if (registry.Has(c.tactic, Transform::kOrdinary)) return c.tactic;
    const std::vector<Tactic> tactics = registry.OrdinaryTactics();
    if (tactics.empty()) return c.tactic;
    Tactic mapped = tactics[size_t(c.tactic.cta_m + c.tactic.cta_n + c.tactic.cta_k) % tactics.size()];
    mapped.splits = c.tactic.splits;
    mapped.swizzle = c.tactic.swizzle;
    return mapped;
  }

  absl::StatusOr<Route> ExpectedRoute(const FuzzCase& c, const Tactic& tactic) const override {
    // A fuzz_gemm finding: the route said "runs" for a swizzle the kernels' launch rejects.
    if (tactic.swizzle > kMaxSwizzleLog2) {
      return absl::InvalidArgumentError(fmt::format("swizzle {} is beyond the kernels' {}", tactic.swizzle,
                                                    kMaxSwizzleLog2));
    }
    const LayerAdmission admission = AdmitLayer(c.scale_bytes);
    return DecideRoute(session_->runner().registry(), tactic, Request(c).transform, c.policy, admission.admitted,
                       admission.Describe());
  }

  absl::StatusOr<Route> Run(const FuzzCase& c, const Tactic& tactic, std::span<uint16_t> output) override {
    absl::StatusOr<const PreparedLayer*> layer = session_->Prepare(c);
    if (!layer.ok()) return layer.status();
    RunRequest request = Request(c);
    request.tactic = tactic;
    return session_->runner().Run(**layer, c.row_offsets, c.activations, output, request);
  }

  absl::Status CheckHealth() override { return session_->runner().CheckDevice(); }

 private:
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

  std::shared_ptr<KernelSession> session_;
  Transform wanted_;
  StepModel model_;
  std::string name_;
};

}  // namespace

std::vector<std::unique_ptr<GemmModule>> MakeKernelModules(std::shared_ptr<GemmRunner> runner,
                                                           StepModel device_model, const std::string& name_suffix) {
  auto session = std::make_shared<KernelSession>(std::move(runner));
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(
      std::make_unique<KernelModule>(session, Transform::kOrdinary, device_model, "ordinary" + name_suffix));
  modules.push_back(std::make_unique<KernelModule>(session, Transform::kFolded, device_model, "folded" + name_suffix));
  return modules;
}

KernelRegistry PartialFoldedRegistry(const KernelRegistry& full) {
  KernelRegistry partial;
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
  std::vector<std::unique_ptr<GemmModule>> modules = MakeKernelModules(std::move(runner), device_model);
  std::vector<std::unique_ptr<GemmModule>> partial_modules =
      MakeKernelModules(std::shared_ptr<GemmRunner>(std::move(*partial)), device_model, "-partial");
  modules.push_back(std::move(partial_modules[1]));  // the folded one; its ordinary twin adds nothing
  return modules;
}

}  // namespace mxdiff::fuzz
