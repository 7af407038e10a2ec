#include "reference/self_check.h"

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

TEST(SelfCheckTest, EveryBuiltInCheckPasses) {
  const std::vector<SelfCheckResult> results = RunSelfChecks();
  EXPECT_GT(results.size(), 100u);
  for (const SelfCheckResult& result : results)
    EXPECT_TRUE(result.passed) << result.name << ": " << result.detail;
}

}  // namespace
}  // namespace mxdiff
