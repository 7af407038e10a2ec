#include "fuzz/checks/layer_target.h"

#include <cstring>
#include <optional>
#include <vector>

#include "fmt/format.h"
#include "fuzz/mutators/fuzz_rules.h"
#include "fuzz/checks/layer_compare.h"
#include "kernels/admitted_scales.h"
#include "kernels/builtin_kernels.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

std::string CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return "ok";
    case absl::StatusCode::kInvalidArgument: return "invalid-argument";
    case absl::StatusCode::kFailedPrecondition: return "failed-precondition";
    case absl::StatusCode::kResourceExhausted: return "resource-exhausted";
    default: return "error";
  }
}

// What one replay must give, from the CPU alone.
struct Expected {
  absl::Status status;
  MoeLayerRoutes routes;
  std::optional<MoeLayerStages> stages;
};

MoeLayerProblem ProblemAt(const LayerCase& c, int r) {
  const LayerReplay& x = c.replays[size_t(r)];
  return MoeLayerProblem{.shape = c.shape,
                         .routing = {x.tokens, x.expert_ids, x.weights},
                         .activations = x.activations,
                         .w13 = {c.w13_codes, LayerScalesAt(c, MoeGemm::kW13, r)},
                         .w2 = {c.w2_codes, LayerScalesAt(c, MoeGemm::kW2, r)}};
}

int Capacity(const LayerCase& c, MoeGemm gemm, const Tactic& tactic) {
  const int configured = gemm == MoeGemm::kW13 ? c.w13_capacity : c.w2_capacity;
  return configured > 0 ? configured : MoeWorstMTiles(c.shape, c.max_tokens, tactic.cta_m);
}

}  // namespace

// The admission verdicts of a case's scale arrays, each array admitted once (expert by expert)
// when the case is checked: the initial W13 and W2 scales and every replay's new ones. All that
// needs a verdict on the way to the kernels (the expected routes, the folded-on-refused check,
// the layer's WriteWeights) takes it from here.
class CaseAdmissions {
 public:
  explicit CaseAdmissions(const LayerCase& c) {
    for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
      std::vector<AdmittedScales>& at = by_replay_[int(gemm)];
      const size_t per_expert = MoeScalesPerExpert(c.shape, gemm);
      at.push_back(AdmittedScales::Admit(gemm == MoeGemm::kW13 ? c.w13_scales : c.w2_scales, per_expert));
      for (const LayerReplay& x : c.replays) {
        const bool fresh = gemm == MoeGemm::kW13 ? x.new_w13_scales : x.new_w2_scales;
        at.push_back(fresh ? AdmittedScales::Admit(gemm == MoeGemm::kW13 ? x.w13_scales : x.w2_scales, per_expert)
                           : at.back());
      }
    }
  }
  // The scales replay `replay` runs on (-1: the initial ones), as LayerScalesAt.
  const AdmittedScales& At(MoeGemm gemm, int replay) const { return by_replay_[int(gemm)][size_t(replay + 1)]; }

 private:
  std::vector<AdmittedScales> by_replay_[2];
};

// What CheckCase derives once and CheckDevice meets: the verdicts and each replay's expectation.
struct LayerCaseState {
  CaseAdmissions admissions;
  std::vector<Expected> expected;  // one per replay
};

namespace {

absl::StatusOr<MoeLayerRoutes> ExpectedRoutes(const LayerCase& c, const CaseAdmissions& admissions, int replay) {
  return DecideMoeRoutes(BuiltinKernelRegistry(), MapLayerTactic(c.w13_tactic), MapLayerTactic(c.w2_tactic),
                         MoeLayerRequest{.transform = c.request, .policy = c.policy},
                         admissions.At(MoeGemm::kW13, replay).layer(), admissions.At(MoeGemm::kW2, replay).layer());
}

absl::StatusOr<Expected> Expect(const LayerCase& c, const CaseAdmissions& admissions, int r, StepModel model) {
  Expected expected;
  absl::StatusOr<MoeLayerRoutes> routes = ExpectedRoutes(c, admissions, r);
  if (!routes.ok()) {
    expected.status = routes.status();
    return expected;
  }
  expected.routes = *routes;
  const MoeLayerProblem problem = ProblemAt(c, r);
  absl::StatusOr<MoeSchedule> schedule = ScheduleMoeRouting(c.shape, problem.routing);
  if (!schedule.ok()) {
    expected.status = schedule.status();
    return expected;
  }
  const int w13 = MoeMTiles(schedule->row_offsets, routes->w13.tactic.cta_m);
  const int w2 = MoeMTiles(schedule->row_offsets, routes->w2.tactic.cta_m);
  if (w13 > Capacity(c, MoeGemm::kW13, routes->w13.tactic) || w2 > Capacity(c, MoeGemm::kW2, routes->w2.tactic)) {
    expected.status = absl::ResourceExhaustedError(fmt::format("{} W13 and {} W2 M tiles needed", w13, w2));
    return expected;
  }
  absl::StatusOr<MoeLayerStages> stages =
      ReferenceMoeLayer(problem, MoeReferenceOptions(*routes, kSwigluLimit, model));
  if (!stages.ok()) return stages.status();
  expected.stages = *std::move(stages);
  return expected;
}

// The CPU side: the schedule's invariants and token independence of the reference layer.
CheckResult CheckCpuSide(const LayerCase& c, int r, const MoeLayerStages& stages, const Expected& expected,
                         StepModel model) {
  const LayerReplay& x = c.replays[size_t(r)];
  const MoeSchedule& s = stages.schedule;
  const int k = c.shape.top_k;
  for (size_t i = 0; i < x.expert_ids.size(); ++i) {
    const int row = s.entry_row[i], id = x.expert_ids[i];
    if (row < s.row_offsets[id] || row >= s.row_offsets[id + 1] || s.row_token[size_t(row)] != int(i) / k) {
      return Finding{"layer/cpu/schedule",
                     fmt::format("replay {}: entry {} (expert {}) got row {}, outside its group or of another token",
                                 r, i, id, row)};
    }
  }
  if (x.tokens < 2) return std::nullopt;
  for (int t = 0; t < x.tokens; ++t) {
    LayerReplay single;
    single.tokens = 1;
    single.expert_ids.assign(x.expert_ids.begin() + t * k, x.expert_ids.begin() + (t + 1) * k);
    single.weights.assign(x.weights.begin() + t * k, x.weights.begin() + (t + 1) * k);
    single.activations.assign(x.activations.begin() + size_t(t) * c.shape.hidden,
                              x.activations.begin() + size_t(t + 1) * c.shape.hidden);
    MoeLayerProblem problem = ProblemAt(c, r);
    problem.routing = {1, single.expert_ids, single.weights};
    problem.activations = single.activations;
    absl::StatusOr<MoeLayerStages> alone =
        ReferenceMoeLayer(problem, MoeReferenceOptions(expected.routes, kSwigluLimit, model));
    if (!alone.ok() || !std::equal(alone->output.begin(), alone->output.end(),
                                   stages.output.begin() + size_t(t) * c.shape.hidden)) {
      return Finding{"layer/cpu/token-dependence",
                     fmt::format("replay {}: token {}'s output differs from the layer run on it alone", r, t)};
    }
  }
  return std::nullopt;
}

bool SameConfig(const MoeLayerConfig& a, const MoeLayerConfig& b) {
  return a.shape == b.shape && a.max_tokens == b.max_tokens && a.w13_tile_capacity == b.w13_tile_capacity &&
         a.w2_tile_capacity == b.w2_tile_capacity && a.swiglu_limit == b.swiglu_limit &&
         a.poison_stages == b.poison_stages;
}

CheckResult WriteScales(MoeLayer& layer, MoeGemm gemm, std::span<const uint8_t> codes, const AdmittedScales& scales) {
  if (absl::Status s = layer.WriteWeights(gemm, 0, codes, scales); !s.ok()) {
    return Finding{"layer/setup/weights", s.ToString()};
  }
  return std::nullopt;
}

// Capture must refuse exactly where the dispatch rules do; `captured` says whether it captured.
CheckResult CheckCapture(MoeLayer& layer, const LayerCase& c, const CaseAdmissions& admissions, bool& captured) {
  const MoeLayerRequest request{.transform = c.request,
                                .policy = c.policy,
                                .w13_tactic = MapLayerTactic(c.w13_tactic),
                                .w2_tactic = MapLayerTactic(c.w2_tactic)};
  const absl::StatusOr<MoeLayerRoutes> want_capture = ExpectedRoutes(c, admissions, -1);
  const absl::StatusOr<MoeLayerRoutes> got = layer.Capture(request);
  captured = got.ok();
  if (got.status().code() != want_capture.status().code()) {
    return Finding{fmt::format("layer/capture/{}-instead-of-{}", CodeName(got.status().code()),
                               CodeName(want_capture.status().code())),
                   fmt::format("Capture: {}; the dispatch rules say {}", got.status().ToString(),
                               want_capture.status().ToString())};
  }
  return std::nullopt;
}

// The status a replay gave against the expected one: a finding where they differ (or an
// InvalidArgument says other words than the reference's).
CheckResult CheckReplayStatus(int r, const absl::Status& got, const absl::Status& want) {
  if (got.code() != want.code()) {
    return Finding{fmt::format("layer/replay/{}-instead-of-{}", CodeName(got.code()), CodeName(want.code())),
                   fmt::format("replay {}: the layer said {}; expected {}", r, got.ToString(), want.ToString())};
  }
  if (!got.ok() && want.code() == absl::StatusCode::kInvalidArgument && got.message() != want.message()) {
    return Finding{"layer/refusal-message", fmt::format("replay {}: '{}' where the reference says '{}'", r,
                                                        std::string(got.message()), std::string(want.message()))};
  }
  return std::nullopt;
}

CheckResult CheckRoutes(const CaseAdmissions& admissions, int r, const MoeLayerRoutes& ran,
                        const MoeLayerRoutes& expected) {
  for (MoeGemm gemm : {MoeGemm::kW13, MoeGemm::kW2}) {
    const Route& got = gemm == MoeGemm::kW13 ? ran.w13 : ran.w2;
    const Route& want = gemm == MoeGemm::kW13 ? expected.w13 : expected.w2;
    if (got != want) {
      return Finding{fmt::format("layer/route/{}/{}-instead-of-{}", MoeGemmName(gemm), RouteReasonName(got.reason),
                                 RouteReasonName(want.reason)),
                     fmt::format("replay {}: {} ran {}, the dispatch rules demand {}", r, MoeGemmName(gemm),
                                 DescribeRoute(got), DescribeRoute(want))};
    }
    if (got.variant == Transform::kFolded && !admissions.At(gemm, r).layer().admitted) {
      return Finding{"layer/route/folded-on-refused", fmt::format("replay {}: {}", r, MoeGemmName(gemm))};
    }
  }
  return std::nullopt;
}

// Replay r on the device against its expectation; `compared` says whether its stages were compared.
CheckResult CheckReplay(MoeLayer& layer, const LayerCase& c, int r, const LayerCaseState& state, bool& compared) {
  compared = false;
  const LayerReplay& x = c.replays[size_t(r)];
  if (x.new_w13_scales) {
    if (CheckResult f = WriteScales(layer, MoeGemm::kW13, c.w13_codes, state.admissions.At(MoeGemm::kW13, r))) return f;
  }
  if (x.new_w2_scales) {
    if (CheckResult f = WriteScales(layer, MoeGemm::kW2, c.w2_codes, state.admissions.At(MoeGemm::kW2, r))) return f;
  }
  if (absl::Status s = layer.SetInputs(x.tokens, x.activations, x.expert_ids, x.weights); !s.ok()) {
    return Finding{"layer/setup/inputs", s.ToString()};
  }
  const Expected& expected = state.expected[size_t(r)];
  const absl::StatusOr<MoeReplay> replay = layer.Replay();
  if (absl::Status health = layer.CheckDevice(); !health.ok()) {
    return Finding{"layer/cuda-error", fmt::format("replay {}: {}", r, health.ToString())};
  }
  if (CheckResult f = CheckReplayStatus(r, replay.status(), expected.status)) return f;
  if (!replay.ok()) return std::nullopt;
  if (CheckResult f = CheckRoutes(state.admissions, r, replay->routes, expected.routes)) return f;
  MoeDeviceStages device;
  if (absl::Status s = layer.ReadStages(device); !s.ok()) return Finding{"layer/cuda-error", s.ToString()};
  const StageDifference difference =
      CompareMoeStages(c.shape, *expected.stages, device, x.tokens, true, replay->routes.w13.tactic.cta_m,
                       replay->routes.w2.tactic.cta_m);
  if (!difference.empty()) {
    return Finding{fmt::format("layer/mismatch/{}/{}-{}", difference.stage, TransformName(replay->routes.w13.variant),
                               TransformName(replay->routes.w2.variant)),
                   fmt::format("replay {} ({} tokens), routes W13 {} W2 {}: {}: {}", r, x.tokens,
                               DescribeRoute(replay->routes.w13), DescribeRoute(replay->routes.w2), difference.stage,
                               difference.description)};
  }
  compared = true;
  return std::nullopt;
}

// The last replay again, from the graph and without it: the same bits as `last`.
CheckResult CheckRepeat(MoeLayer& layer, const LayerCase& c, const MoeLayerStages& last) {
  const LayerReplay& x = c.replays.back();
  if (absl::Status s = layer.SetInputs(x.tokens, x.activations, x.expert_ids, x.weights); !s.ok()) {
    return Finding{"layer/setup/inputs", s.ToString()};
  }
  for (bool graph : {true, false}) {
    const absl::StatusOr<MoeReplay> again = graph ? layer.Replay() : layer.RunEager();
    MoeDeviceStages device;
    StageDifference difference{"status", again.status().ToString()};
    if (again.ok()) {
      if (absl::Status s = layer.ReadStages(device); !s.ok()) return Finding{"layer/cuda-error", s.ToString()};
      difference = CompareMoeStages(c.shape, last, device, x.tokens, true, again->routes.w13.tactic.cta_m,
                                    again->routes.w2.tactic.cta_m);
    }
    if (!difference.empty()) {
      return Finding{graph ? std::string("layer/nondeterminism") : "layer/graph-vs-eager/" + difference.stage,
                     fmt::format("the last replay again ({}): {}: {}", graph ? "graph" : "eager", difference.stage,
                                 difference.description)};
    }
  }
  return std::nullopt;
}

}  // namespace

Tactic MapLayerTactic(const Tactic& tactic) {
  if (CtaShapeIndex(tactic) >= 0) return tactic;
  static const std::vector<Tactic> built = [] {
    std::vector<Tactic> tactics;
    for (const CtaShape& shape : kCtaShapes) tactics.push_back(Tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k});
    return tactics;
  }();
  return PickBuiltTactic(tactic, built);
}

LayerDifferential::LayerDifferential(bool use_device)
    : device_(use_device ? OpenLayerDevice() : absl::UnavailableError("the device was not asked for")) {}

CheckResult LayerDifferential::CheckCase(const LayerCase& c) {
  const StepModel model = device_.ok() ? device_->model : StepModel::kSm90Emulated;
  LayerCaseState state{.admissions = CaseAdmissions(c), .expected = {}};
  for (int r = 0; r < int(c.replays.size()); ++r) {
    absl::StatusOr<Expected> expected = Expect(c, state.admissions, r, model);
    if (!expected.ok()) {
      return Finding{"layer/reference/rejected-valid-case",
                     fmt::format("replay {}: the reference refused the case: {}", r, expected.status().ToString())};
    }
    if (expected->stages) {
      if (CheckResult finding = CheckCpuSide(c, r, *expected->stages, *expected, model)) return finding;
    }
    state.expected.push_back(*std::move(expected));
  }
  return device_.ok() ? CheckDevice(c, state) : std::nullopt;
}

CheckResult LayerDifferential::OpenLayer(const LayerCase& c) {
  const MoeLayerConfig config{.shape = c.shape,
                              .max_tokens = c.max_tokens,
                              .w13_tile_capacity = c.w13_capacity,
                              .w2_tile_capacity = c.w2_capacity,
                              .poison_stages = true};
  if (layer_ != nullptr && SameConfig(config, config_)) return std::nullopt;
  layer_.reset();
  absl::StatusOr<std::unique_ptr<MoeLayer>> layer = CreateDeviceMoeLayer(config);
  if (!layer.ok()) return Finding{"layer/setup/create", layer.status().ToString()};
  layer_ = *std::move(layer);
  config_ = config;
  return std::nullopt;
}

CheckResult LayerDifferential::CheckDevice(const LayerCase& c, LayerCaseState& state) {
  if (CheckResult f = OpenLayer(c)) return f;
  MoeLayer& layer = *layer_;
  if (CheckResult f = WriteScales(layer, MoeGemm::kW13, c.w13_codes, state.admissions.At(MoeGemm::kW13, -1))) return f;
  if (CheckResult f = WriteScales(layer, MoeGemm::kW2, c.w2_codes, state.admissions.At(MoeGemm::kW2, -1))) return f;
  bool captured = false;
  if (CheckResult f = CheckCapture(layer, c, state.admissions, captured)) return f;
  if (!captured) return std::nullopt;  // refused as it must be: nothing to replay

  std::optional<MoeLayerStages> last;  // of the last replay, where it was compared
  for (int r = 0; r < int(c.replays.size()); ++r) {
    bool compared = false;
    if (CheckResult f = CheckReplay(layer, c, r, state, compared)) return f;
    if (!compared) continue;
    ++replays_compared_;
    last = r + 1 == int(c.replays.size()) ? std::move(state.expected[size_t(r)].stages) : std::nullopt;
  }
  if (last) {
    if (CheckResult f = CheckRepeat(layer, c, *last)) return f;
  }
  if (absl::Status health = layer.CheckDevice(); !health.ok()) return Finding{"layer/cuda-error", health.ToString()};
  return std::nullopt;
}

}  // namespace mxdiff::fuzz
