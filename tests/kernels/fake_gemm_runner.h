// A GemmRunner without a device, for CPU tests of what sits on top of a runner (the
// tune-on-first-use mode, the bench's protocols): it records the tactic of every launch and has a
// fake tuner that returns a chosen winner. Runs compute nothing (the output is left as it is).
#pragma once

#include <memory>
#include <vector>

#include "kernels/dispatch_table.h"
#include "kernels/gemm_runner.h"

namespace mxdiff::testing {

class FakeLayer final : public PreparedLayer {
 public:
  FakeLayer(int groups, int n, int k) : groups_(groups), n_(n), k_(k) {}
  int groups() const override { return groups_; }
  int n() const override { return n_; }
  int k() const override { return k_; }
  const LayerAdmission& admission() const override { return admission_; }

 private:
  int groups_, n_, k_;
  LayerAdmission admission_;  // admitted
};

class FakeGemmRunner final : public GemmRunner {
 public:
  FakeGemmRunner(Tactic table, Tactic winner) : table_(table), winner_(winner) {}

  const KernelRegistry& registry() const override { return registry_; }
  std::string DeviceName() const override { return "fake"; }
  absl::StatusOr<std::unique_ptr<PreparedLayer>> Prepare(int groups, int n, int k, std::span<const uint8_t>,
                                                        std::span<const uint8_t>) override {
    return std::unique_ptr<PreparedLayer>(std::make_unique<FakeLayer>(groups, n, k));
  }
  absl::StatusOr<Route> Run(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                            std::span<const uint16_t>, std::span<uint16_t>, const RunRequest& request) override {
    return Launch(layer, row_offsets, request);
  }
  absl::StatusOr<Route> RunOnDevice(const PreparedLayer& layer, const DeviceBatch& batch,
                                    const RunRequest& request) override {
    return Launch(layer, batch.row_offsets, request);
  }
  absl::StatusOr<Tactic> Tune(const PreparedLayer&, std::span<const int32_t>) override {
    ++tunings;
    if (fail_tuning) return absl::InternalError("fake tuner failed");
    return winner_;
  }
  Tactic DefaultTactic(int, int, std::span<const int32_t>) const override { return table_; }
  absl::Status CheckDevice() override { return absl::OkStatus(); }

  std::vector<Tactic> launched;  // the tactic of every launch, in order
  int tunings = 0;
  bool fail_tuning = false;

 private:
  absl::StatusOr<Route> Launch(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                               const RunRequest& request) {
    if (row_offsets.size() != size_t(layer.groups()) + 1) return absl::InvalidArgumentError("row offsets");
    const Tactic tactic = request.tactic.value_or(table_);
    launched.push_back(tactic);
    Route route;
    route.variant = request.transform == TransformRequest::kFolded ? Transform::kFolded : Transform::kOrdinary;
    route.tactic = tactic;
    return route;
  }

  KernelRegistry registry_;
  Tactic table_;
  Tactic winner_;
};

}  // namespace mxdiff::testing
