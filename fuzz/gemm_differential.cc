#include "fuzz/gemm_differential.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/coverage_counters.h"
#include "reference/admission.h"
#include "reference/reference_gemm.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

int GroupOfRow(const FuzzCase& c, int row) {
  int g = 0;
  while (c.row_offsets[g + 1] <= row) ++g;
  return g;
}

std::string TacticSignature(const FuzzCase& c, const Tactic& t) {
  return fmt::format("{}x{}x{}/s{}", t.cta_m, t.cta_n, t.cta_k, effective_splits(c.k, t.cta_k, t.splits));
}

bool SameRoute(const Route& a, const Route& b) {
  return a.variant == b.variant && a.reason == b.reason && a.tactic == b.tactic;
}

std::string RouteText(const Route& route) {
  return fmt::format("{} ({}) tactic {}", TransformName(route.variant), RouteReasonName(route.reason),
                     TacticName(route.tactic));
}

}  // namespace

std::string ScaleClassOfColumn(const FuzzCase& c, int row, int column) {
  const size_t blocks = size_t(c.k) / kBlockK;
  const size_t first = (size_t(GroupOfRow(c, row)) * size_t(c.n) + size_t(column)) * blocks;
  int worst = 1;  // 0: a=0, 1: admitted, 2: a=17, 3: a>=18
  for (size_t b = 0; b < blocks; ++b) {
    const int a = adjusted_exponent(c.scale_bytes[first + b]);
    const int cls = a == 0 ? 0 : a <= 16 ? 1 : a == 17 ? 2 : 3;
    if (cls == 0 || (worst != 0 && cls > worst)) worst = cls;
  }
  static constexpr const char* kNames[] = {"a=0", "a=1..16", "a=17", "a>=18"};
  return kNames[worst];
}

int F16UlpDistance(uint16_t a, uint16_t b) {
  if (f16_is_nan(a) || f16_is_nan(b)) return a == b ? 0 : 65536;
  auto ordered = [](uint16_t h) { return (h & 0x8000) ? -int(h & 0x7FFF) : int(h); };
  return std::abs(ordered(a) - ordered(b));
}

GemmDifferential::GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules)
    : modules_(std::move(modules)) {}

absl::StatusOr<const std::vector<uint16_t>*> GemmDifferential::Reference(const FuzzCase& c, const ReferenceKey& key) {
  auto found = reference_cache_.find(key);
  if (found != reference_cache_.end()) return &found->second;
  ReferenceOptions options;
  options.transform = key.transform;
  options.model = key.model;
  options.tactic.cta_k = key.cta_k;
  options.tactic.splits = key.splits;
  std::vector<uint16_t> output;
  if (absl::Status status = ReferenceGemm(c.Problem(), options, output); !status.ok()) return status;
  return &reference_cache_.emplace(key, std::move(output)).first->second;
}

CheckResult GemmDifferential::CheckCpuSide(const FuzzCase& c) {
  // The reference must agree with itself across thread counts: the GPU side's oracle is only
  // as good as its determinism.
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    ReferenceOptions options;
    options.transform = transform;
    options.model = c.model;
    options.tactic = c.tactic;
    options.threads = 1;
    std::vector<uint16_t> single, multi;
    absl::Status status = ReferenceGemm(c.Problem(), options, single);
    options.threads = 0;
    if (status.ok()) status = ReferenceGemm(c.Problem(), options, multi);
    if (!status.ok()) {
      return Finding{"reference/rejected-valid-case", fmt::format("ReferenceGemm: {}", status.ToString())};
    }
    if (single != multi) {
      return Finding{fmt::format("nondeterminism/reference/{}", TransformName(transform)),
                     "the reference gives different bits single-threaded and multi-threaded"};
    }
    reference_cache_[ReferenceKey{transform, c.model, c.tactic.cta_k, c.tactic.splits}] = std::move(single);
  }
  return std::nullopt;
}

CheckResult GemmDifferential::CheckCase(const FuzzCase& c) {
  reference_cache_.clear();
  if (CheckResult finding = CheckCpuSide(c)) return finding;
  const size_t elements = size_t(c.rows()) * size_t(c.n);
  const bool admitted = AdmitLayer(c.scale_bytes).admitted;
  std::vector<uint16_t> ordinary_bits, folded_bits;  // outputs of routes that ran each variant
  bool any_ran = false;

  for (const std::unique_ptr<GemmModule>& module : modules_) {
    const std::string name = module->name();
    const Tactic tactic = module->MapTactic(c);
    const StepModel model = module->model().value_or(c.model);
    absl::StatusOr<Route> expected = module->ExpectedRoute(c, tactic);
    std::vector<uint16_t> first(elements, kOutputPoison), second(elements, kOutputPoison);
    absl::StatusOr<Route> route = module->Run(c, tactic, first);
    if (absl::Status health = module->CheckHealth(); !health.ok()) {
      return Finding{fmt::format("cuda-error/{}", name),
                     fmt::format("{} left the device unhealthy after tactic {}: {}", name, TacticName(tactic),
                                 health.ToString())};
    }
    if (!route.ok() && route.status().code() == absl::StatusCode::kUnimplemented) {
      ++runs_unsupported_;
      continue;
    }
    if (!route.ok() || !expected.ok()) {
      if (!route.ok() && !expected.ok() && route.status().code() == expected.status().code()) {
        for (uint16_t bits : first) {
          if (bits != kOutputPoison) {
            return Finding{fmt::format("route/{}/output-written-on-error", name),
                           fmt::format("{} failed ({}) but wrote the output", name, route.status().ToString())};
          }
        }
        CountRouteError(c.request, c.policy, route.status().code());
        continue;
      }
      return Finding{fmt::format("route/{}/{}", name, route.ok() ? "ran-where-it-must-fail" : "unexpected-error"),
                     fmt::format("{} with tactic {}: got {}, expected {}", name, TacticName(tactic),
                                 route.ok() ? RouteText(*route) : route.status().ToString(),
                                 expected.ok() ? RouteText(*expected) : expected.status().ToString())};
    }
    CountRoute(*route);
    if (route->variant == Transform::kFolded && !admitted) {
      return Finding{"route/folded-on-refused",
                     fmt::format("{} ran folded on a refused layer: {}", name, AdmitLayer(c.scale_bytes).Describe())};
    }
    if (!SameRoute(*route, *expected)) {
      return Finding{fmt::format("route/{}/{}-instead-of-{}", name, RouteReasonName(route->reason),
                                 RouteReasonName(expected->reason)),
                     fmt::format("{} reported route {}, the dispatch rules demand {}", name, RouteText(*route),
                                 RouteText(*expected))};
    }
    absl::StatusOr<const std::vector<uint16_t>*> reference =
        Reference(c, ReferenceKey{route->variant, model, route->tactic.cta_k, route->tactic.splits});
    if (!reference.ok()) {
      return Finding{"reference/rejected-valid-case", fmt::format("ReferenceGemm: {}", reference.status().ToString())};
    }
    for (size_t i = 0; i < elements; ++i) {
      if (first[i] == kOutputPoison || first[i] == kRunnerPoison) {
        return Finding{fmt::format("no-launch/{}/{}", name, TacticSignature(c, route->tactic)),
                       fmt::format("{} returned route {} but left element {} (of {}) unwritten", name,
                                   RouteText(*route), i, elements)};
      }
    }
    for (size_t i = 0; i < elements; ++i) {
      if (first[i] == (**reference)[i]) continue;
      const int row = int(i / size_t(c.n)), column = int(i % size_t(c.n));
      return Finding{fmt::format("mismatch/{}{}/{}/{}", name == TransformName(route->variant) ? "" : name + "/",
                                 TransformName(route->variant), TacticSignature(c, route->tactic),
                                 ScaleClassOfColumn(c, row, column)),
                     fmt::format("{}: element [{}][{}] is 0x{:04x} ({}), the reference ({} {}) says 0x{:04x} ({}), "
                                 "{} ulp; route {}",
                                 name, row, column, first[i], f16_to_f32(first[i]), TransformName(route->variant),
                                 StepModelName(model), (**reference)[i], f16_to_f32((**reference)[i]),
                                 F16UlpDistance(first[i], (**reference)[i]), RouteText(*route))};
    }
    absl::StatusOr<Route> again = module->Run(c, tactic, second);
    if (!again.ok() || !SameRoute(*again, *route) || second != first) {
      return Finding{fmt::format("nondeterminism/{}/{}", name, TacticSignature(c, route->tactic)),
                     fmt::format("{}: a second run of the same case gave {}", name,
                                 again.ok() ? (SameRoute(*again, *route) ? "different bits"
                                                                         : "route " + RouteText(*again))
                                            : again.status().ToString())};
    }
    if (absl::Status health = module->CheckHealth(); !health.ok()) {
      return Finding{fmt::format("cuda-error/{}", name), health.ToString()};
    }
    any_ran = true;
    if (module->model().has_value()) {
      (route->variant == Transform::kFolded ? folded_bits : ordinary_bits) = std::move(first);
    }
  }
  // Folded ran on an admitted layer: it must equal the ordinary kernel bit for bit (the
  // reference comparison implies it; this is the claim the seed project made, checked directly).
  if (!ordinary_bits.empty() && !folded_bits.empty() && ordinary_bits != folded_bits) {
    return Finding{"mismatch/ordinary-vs-folded", "ordinary and folded kernels differ on an admitted layer"};
  }
  if (any_ran) ++cases_compared_;
  return std::nullopt;
}

}  // namespace mxdiff::fuzz
