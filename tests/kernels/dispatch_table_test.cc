#include "kernels/dispatch_table.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"
#include "reference/split_plan.h"

namespace mxdiff {
namespace {

TEST(DispatchTableTest, ShapeOfFindsTheLargestGroup) {
  const std::vector<int32_t> offsets = {0, 1, 1, 9, 12};
  const DispatchShape shape = ShapeOf(512, 256, offsets);
  EXPECT_EQ(shape.groups, 4);
  EXPECT_EQ(shape.max_group_rows, 8);
  EXPECT_EQ(shape.n, 512);
  EXPECT_EQ(shape.k, 256);
}

TEST(DispatchTableTest, EveryChoiceIsABuiltOrdinaryKernelWithAValidSplitCount) {
  const KernelRegistry registry = BuiltinKernelRegistry();
  for (int groups : {1, 6, 64}) {
    for (int rows : {0, 1, 7, 9, 17, 40, 100}) {
      for (int n : {1, 512, 4096}) {
        for (int k : {32, 256, 4096}) {
          const DispatchShape shape{groups, rows, n, k};
          const Tactic tactic = TableTactic(shape, 132);
          EXPECT_TRUE(registry.Has(tactic, Transform::kOrdinary)) << TacticName(tactic);
          EXPECT_GE(tactic.splits, 1);
          EXPECT_LE(tactic.splits, 64);
          EXPECT_TRUE(ValidateTactic(tactic).ok());
        }
      }
    }
  }
}

TEST(DispatchTableTest, DecodeShapesUseTheSmallestCta) {
  for (const auto& [n, k] : {std::pair{1024, 4096}, {4096, 512}, {512, 4096}, {4096, 256}}) {
    EXPECT_EQ(TableTactic(DispatchShape{6, 1, n, k}, 132).cta_m, 8);
  }
  EXPECT_EQ(TableTactic(DispatchShape{2, 30, 4096, 4096}, 132).cta_m, 32);
}

TEST(DispatchTableTest, CandidatesHaveDistinctEffectiveSplits) {
  const DispatchShape shape{6, 1, 1024, 4096};
  const std::vector<Tactic> candidates = CandidateTactics(BuiltinKernelRegistry(), shape);
  ASSERT_FALSE(candidates.empty());
  for (size_t i = 0; i < candidates.size(); ++i) {
    EXPECT_EQ(candidates[i].splits, effective_splits(4096, candidates[i].cta_k, candidates[i].splits));
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(candidates[i] == candidates[j]) << TacticName(candidates[i]);
  }
  // One row per group: the 16-row CTA is the tallest worth measuring.
  for (const Tactic& tactic : candidates) EXPECT_LE(tactic.cta_m, 16) << TacticName(tactic);
}

}  // namespace
}  // namespace mxdiff
