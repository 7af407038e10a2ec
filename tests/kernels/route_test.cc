#include "kernels/route.h"

#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"
#include "kernels/tile_raster.h"

namespace mxdiff {
namespace {

constexpr Tactic kTactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 3, .swizzle = 1};

KernelRegistry OrdinaryOnly() {
  KernelRegistry registry;
  for (const CtaShape& shape : kCtaShapes) {
    registry.Add(Tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k}, Transform::kOrdinary);
  }
  return registry;
}

TEST(RouteTest, OrdinaryRequestRunsOrdinaryWithTheSameTactic) {
  for (bool admitted : {false, true}) {
    for (FallbackPolicy policy : {FallbackPolicy::kFallback, FallbackPolicy::kFailClosed}) {
      absl::StatusOr<Route> route = DecideRoute(BuiltinKernelRegistry(), kTactic, TransformRequest::kOrdinary,
                                                policy, admitted, "refused: x");
      ASSERT_TRUE(route.ok()) << route.status();
      EXPECT_EQ(route->variant, Transform::kOrdinary);
      EXPECT_EQ(route->reason, RouteReason::kOrdinaryRequested);
      EXPECT_EQ(route->tactic, kTactic);
    }
  }
}

TEST(RouteTest, InvalidTacticIsRejectedBeforeAnyRoute) {
  Tactic tactic = kTactic;
  tactic.splits = 0;
  absl::StatusOr<Route> route = DecideRoute(BuiltinKernelRegistry(), tactic, TransformRequest::kOrdinary,
                                            FallbackPolicy::kFallback, true, "");
  EXPECT_EQ(route.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(route.status().message().find("splits"), std::string::npos) << route.status();
}

TEST(RouteTest, FoldedRunsExactlyTheOrdinaryTacticOnAnAdmittedLayer) {
  for (TransformRequest request : {TransformRequest::kFolded, TransformRequest::kAuto}) {
    absl::StatusOr<Route> route =
        DecideRoute(BuiltinKernelRegistry(), kTactic, request, FallbackPolicy::kFailClosed, true, "");
    ASSERT_TRUE(route.ok()) << route.status();
    EXPECT_EQ(route->variant, Transform::kFolded);
    EXPECT_EQ(route->reason, RouteReason::kFoldedAdmitted);
    EXPECT_EQ(route->tactic, kTactic);
  }
}

TEST(RouteTest, RefusedLayerFallsBackAndSaysWhy) {
  absl::StatusOr<Route> route = DecideRoute(BuiltinKernelRegistry(), kTactic, TransformRequest::kFolded,
                                            FallbackPolicy::kFallback, false, "first raw 112 at 17");
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->variant, Transform::kOrdinary);
  EXPECT_EQ(route->reason, RouteReason::kLayerRefused);
  EXPECT_EQ(route->detail, "first raw 112 at 17");
  EXPECT_EQ(route->tactic, kTactic);
}

TEST(RouteTest, FailClosedRefusesAnExplicitFoldedRequestItCannotHonour) {
  absl::StatusOr<Route> refused = DecideRoute(BuiltinKernelRegistry(), kTactic, TransformRequest::kFolded,
                                              FallbackPolicy::kFailClosed, false, "first raw 129 at 0");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("raw 129"), std::string_view::npos) << refused.status();
  absl::StatusOr<Route> missing = DecideRoute(OrdinaryOnly(), kTactic, TransformRequest::kFolded,
                                              FallbackPolicy::kFailClosed, true, "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RouteTest, AutoFallsBackEvenWhenFailClosed) {
  absl::StatusOr<Route> route = DecideRoute(BuiltinKernelRegistry(), kTactic, TransformRequest::kAuto,
                                            FallbackPolicy::kFailClosed, false, "refused");
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->reason, RouteReason::kLayerRefused);
}

TEST(RouteTest, MissingFoldedInstantiationFallsBackToOrdinaryNeverToNothing) {
  absl::StatusOr<Route> route =
      DecideRoute(OrdinaryOnly(), kTactic, TransformRequest::kFolded, FallbackPolicy::kFallback, true, "");
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->variant, Transform::kOrdinary);
  EXPECT_EQ(route->reason, RouteReason::kFoldedMissing);
  EXPECT_NE(route->detail.find("16x128x32"), std::string::npos) << route->detail;
}

TEST(RouteTest, NoOrdinaryKernelIsAnError) {
  Tactic unbuilt = kTactic;
  unbuilt.cta_n = 64;
  absl::StatusOr<Route> route = DecideRoute(BuiltinKernelRegistry(), unbuilt, TransformRequest::kAuto,
                                            FallbackPolicy::kFallback, true, "");
  EXPECT_EQ(route.status().code(), absl::StatusCode::kInvalidArgument);
}

// The registry is what the launch asks too (gemm_runner.cc), so a tactic it refuses never
// reaches a kernel, and a route never promises one.
TEST(RouteTest, TheRegistryDecidesTheSwizzleLimit) {
  const KernelRegistry builtin = BuiltinKernelRegistry();
  EXPECT_EQ(builtin.max_swizzle(), kMaxSwizzleLog2);
  Tactic widest = kTactic;
  widest.swizzle = kMaxSwizzleLog2;
  EXPECT_TRUE(builtin.CheckLaunchable(widest, Transform::kFolded).ok());
  EXPECT_TRUE(DecideRoute(builtin, widest, TransformRequest::kAuto, FallbackPolicy::kFallback, true, "").ok());
  Tactic too_wide = widest;
  too_wide.swizzle = kMaxSwizzleLog2 + 1;
  const absl::Status launch = builtin.CheckLaunchable(too_wide, Transform::kOrdinary);
  EXPECT_EQ(launch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(launch.message().find("swizzle"), std::string_view::npos) << launch;
  absl::StatusOr<Route> route =
      DecideRoute(builtin, too_wide, TransformRequest::kAuto, FallbackPolicy::kFallback, true, "");
  EXPECT_EQ(route.status(), launch);
  // A registry without a swizzle limit (fuzz_dispatch's) takes any valid tactic.
  KernelRegistry unlimited;
  unlimited.Add(kTactic, Transform::kOrdinary);
  too_wide.swizzle = kMaxSwizzleField;
  EXPECT_TRUE(unlimited.CheckLaunchable(too_wide, Transform::kOrdinary).ok());
  // What GemmRunner::CreateWithRegistry does with such a registry: the kernels' limit applies.
  const KernelRegistry narrowed = unlimited.WithSwizzleLimit(kMaxSwizzleLog2);
  EXPECT_EQ(narrowed.max_swizzle(), kMaxSwizzleLog2);
  EXPECT_EQ(narrowed.CheckLaunchable(too_wide, Transform::kOrdinary).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(narrowed.WithSwizzleLimit(kMaxSwizzleField).max_swizzle(), kMaxSwizzleLog2);
}

TEST(RouteTest, NamesAreStable) {
  EXPECT_EQ(RouteReasonName(RouteReason::kLayerRefused), "layer-refused");
  EXPECT_EQ(RouteReasonName(RouteReason::kFoldedMissing), "folded-missing");
  EXPECT_EQ(TransformName(Transform::kFolded), "folded");
  EXPECT_EQ(TransformRequestName(TransformRequest::kAuto), "auto");
  EXPECT_EQ(FallbackPolicyName(FallbackPolicy::kFailClosed), "fail-closed");
}

// A route is its variant, tactic and reason; the detail (prose) does not count.
TEST(RouteTest, EqualityIsVariantTacticAndReason) {
  const Route folded{
      .variant = Transform::kFolded, .tactic = kTactic, .reason = RouteReason::kFoldedAdmitted, .detail = ""};
  Route other = folded;
  other.detail = "raw 112 at [0, 0]";
  EXPECT_TRUE(folded == other);
  other = folded;
  other.variant = Transform::kOrdinary;
  EXPECT_FALSE(folded == other);
  other = folded;
  other.reason = RouteReason::kFoldedMissing;
  EXPECT_FALSE(folded == other);
  other = folded;
  other.tactic.swizzle = kTactic.swizzle + 1;
  EXPECT_TRUE(folded != other);
  EXPECT_EQ(DescribeRoute(folded), "folded 16x128x32/s3/w1 (folded-admitted)");
}

}  // namespace
}  // namespace mxdiff
