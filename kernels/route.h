// The dispatch decision, host-only and CUDA-free so that it can be unit-tested and fuzzed
// without a GPU. One authority: the ordinary variant's tactic is chosen first (by the caller:
// table or measurement); the folded variant only ever runs that exact tactic, only on a layer
// that was admitted at prepare time, and only if a folded instantiation of that tactic
// exists. Everything else runs the ordinary kernel and says why, or, fail-closed, is an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "reference/problem.h"
#include "reference/transform.h"

namespace mxdiff {

enum class TransformRequest : uint8_t { kOrdinary = 0, kFolded = 1, kAuto = 2 };
enum class FallbackPolicy : uint8_t { kFallback = 0, kFailClosed = 1 };

enum class RouteReason : uint8_t {
  kOrdinaryRequested = 0,  // ordinary asked for, ordinary ran
  kFoldedAdmitted = 1,     // folded asked for (or auto), layer admitted, instantiation present
  kLayerRefused = 2,       // folded wanted, a scale byte of the layer is outside the admitted set
  kFoldedMissing = 3,      // folded wanted and admitted, but no folded kernel for the tactic
};
inline constexpr int kRouteReasonCount = 4;

std::string_view TransformName(Transform transform);         // "ordinary" / "folded"
std::string_view TransformRequestName(TransformRequest request);  // + "auto"
std::string_view FallbackPolicyName(FallbackPolicy policy);  // "fallback" / "fail-closed"
std::string_view RouteReasonName(RouteReason reason);  // "ordinary-requested", "folded-admitted", ...

// What can launch in a build: which (CTA shape, transform) kernels exist and how wide a raster
// swizzle they take. The one authority that DecideRoute and the launch both ask. Kernels
// register explicitly (no static initializers); tests check the registry's size.
class KernelRegistry {
 public:
  // `max_swizzle`: the widest raster swizzle (log2) the kernels accept; by default any swizzle
  // ValidateTactic accepts (a registry that describes kernels without that limit).
  explicit KernelRegistry(int max_swizzle = kMaxSwizzleField) : max_swizzle_(max_swizzle) {}

  void Add(const Tactic& tactic, Transform transform);
  // An instantiation of the tactic's CTA shape exists (splits and swizzle are run-time).
  bool Has(const Tactic& tactic, Transform transform) const;
  // InvalidArgument, saying why, unless a kernel for exactly this tactic and transform can
  // launch: an instantiation exists and the swizzle is within max_swizzle().
  absl::Status CheckLaunchable(const Tactic& tactic, Transform transform) const;
  int max_swizzle() const { return max_swizzle_; }
  // The same kernels with the swizzle limit lowered to `max_swizzle` (never raised).
  KernelRegistry WithSwizzleLimit(int max_swizzle) const {
    KernelRegistry narrowed = *this;
    if (max_swizzle < narrowed.max_swizzle_) narrowed.max_swizzle_ = max_swizzle;
    return narrowed;
  }
  // Tactics for which an ordinary kernel exists, in registration order.
  std::vector<Tactic> OrdinaryTactics() const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Tactic tactic;
    Transform transform;
  };
  std::vector<Entry> entries_;
  int max_swizzle_;
};

struct Route {
  Transform variant = Transform::kOrdinary;  // what runs
  Tactic tactic;                             // exactly the ordinary tactic
  RouteReason reason = RouteReason::kOrdinaryRequested;
  std::string detail;                        // e.g. the first refused byte and its position

  // The same route: the same variant runs the same tactic for the same reason. `detail` is prose
  // about the decision (which byte refused the layer) and not part of the route.
  friend bool operator==(const Route& a, const Route& b) {
    return a.variant == b.variant && a.reason == b.reason && a.tactic == b.tactic;
  }
};

// "folded 8x128x64/s16/w0 (folded-admitted)": a route in reports, findings and messages.
std::string DescribeRoute(const Route& route);

// `layer_admitted` and `refusal_detail` come from the reference's admission verdict, computed
// once when the layer's scales were prepared. Errors: InvalidArgument when the tactic is invalid
// (ValidateTactic) or no ordinary kernel can launch it (CheckLaunchable: never silent), and
// FailedPrecondition when fail-closed forbids the fallback an explicit folded request needs.
absl::StatusOr<Route> DecideRoute(const KernelRegistry& registry, const Tactic& ordinary_tactic,
                                  TransformRequest request, FallbackPolicy policy,
                                  bool layer_admitted, std::string_view refusal_detail);

}  // namespace mxdiff
