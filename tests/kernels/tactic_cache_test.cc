#include "kernels/tactic_cache.h"

#include <vector>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

TEST(TacticCacheTest, StoresPerDeviceAndShapeAndOverwrites) {
  TacticCache cache;
  const DispatchShape w13{6, 1, 1024, 4096};
  const DispatchShape w2{6, 1, 4096, 512};
  EXPECT_FALSE(cache.Find("H200", w13).has_value());
  cache.Store("H200", w13, Tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 8});
  cache.Store("H200", w2, Tactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 2});
  EXPECT_EQ(cache.Find("H200", w13)->splits, 8);
  EXPECT_EQ(cache.Find("H200", w2)->cta_m, 16);
  EXPECT_FALSE(cache.Find("V100", w13).has_value());
  cache.Store("H200", w13, Tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 4});
  EXPECT_EQ(cache.Find("H200", w13)->splits, 4);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(FastestTacticTest, PicksTheMinimumAndTheFirstOnATie) {
  const std::vector<Tactic> candidates = {Tactic{.splits = 1}, Tactic{.splits = 2}, Tactic{.splits = 3}};
  auto times = [](const Tactic& tactic) -> absl::StatusOr<double> { return tactic.splits == 1 ? 3.0 : 2.0; };
  absl::StatusOr<Tactic> best = FastestTactic(candidates, times);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->splits, 2);
}

TEST(FastestTacticTest, PropagatesMeasurementErrorsAndRejectsNoCandidates) {
  auto failing = [](const Tactic&) -> absl::StatusOr<double> { return absl::InternalError("launch failed"); };
  EXPECT_EQ(FastestTactic({Tactic{}}, failing).status().code(), absl::StatusCode::kInternal);
  auto any = [](const Tactic&) -> absl::StatusOr<double> { return 1.0; };
  EXPECT_EQ(FastestTactic({}, any).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxdiff
