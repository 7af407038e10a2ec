// fuzz_layer's property (fuzz/README.md, "fuzz_layer"): a case is one MoE layer captured once into
// a CUDA graph and replayed with each of its replays' inputs and scale bytes. For every replay the
// expectation is derived on the CPU alone, independently of the layer's code: the routes of both
// GEMMs from the dispatch rules on each GEMM's own admission verdict (route.h via DecideMoeRoutes),
// the refusal the routing deserves (an expert id out of range: InvalidArgument with the
// reference's words; more M tiles than the capture's capacity: ResourceExhausted), else every
// stage's bits from ReferenceMoeLayer. The device layer must meet it exactly: same status code,
// same routes, the same bits at every stage, nothing written beyond the routing's rows, the same
// bits again on a second replay and without the graph, a healthy device afterwards. The CPU side
// (always, also without a GPU): the schedule's invariants and each token's output equal to the
// layer run on that token alone.
#pragma once

#include <memory>

#include "fuzz/driver/findings.h"
#include "fuzz/formats/layer_case_format.h"
#include "fuzz/checks/layer_device.h"

namespace mxdiff::fuzz {

// The ordinary tactic the builtin kernels run for a case's tactic: itself where its CTA shape is
// instantiated, else a deterministic pick among the instantiated shapes (same splits and swizzle).
Tactic MapLayerTactic(const Tactic& tactic);

struct LayerCaseState;  // the case's admission verdicts and expectations, derived once (layer_target.cc)

class LayerDifferential {
 public:
  // `use_device`: open the GPU (OpenLayerDevice); where it is unavailable only the CPU side runs.
  explicit LayerDifferential(bool use_device);

  CheckResult CheckCase(const LayerCase& c);
  // The device layer dropped: the next case creates and captures a new one.
  void ForgetState() { layer_.reset(); }

  bool device_available() const { return device_.ok(); }
  const absl::StatusOr<LayerDevice>& device() const { return device_; }
  size_t replays_compared() const { return replays_compared_; }

 private:
  // The device layer for `c`'s configuration: the one kept, or a new one.
  CheckResult OpenLayer(const LayerCase& c);
  CheckResult CheckDevice(const LayerCase& c, LayerCaseState& state);

  absl::StatusOr<LayerDevice> device_;
  std::unique_ptr<MoeLayer> layer_;  // reused while the configuration stays the same
  MoeLayerConfig config_;
  size_t replays_compared_ = 0;
};

}  // namespace mxdiff::fuzz
