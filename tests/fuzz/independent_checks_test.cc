// The independent checks pass on the repository's own arithmetic (their power against planted
// defects is measured by campaigns: fuzz/README.md).
#include "fuzz/checks/independent_checks.h"

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/driver/target_driver.h"
#include "gtest/gtest.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

TEST(IndependentChecks, TheRecordingsAreCompiledIn) { EXPECT_EQ(RecordedVectorRows(), 2500u); }

TEST(IndependentChecks, TheSharedRulesAgreeWithIndependentArithmetic) {
  CaseRng rng(mxdiff::testing::TestSeed());
  for (int i = 0; i < 300; ++i) {
    const FuzzCase c = RandomCase(rng, kReferenceProfile);
    const CheckResult finding = CheckAgainstIndependentArithmetic(c);
    ASSERT_FALSE(finding.has_value()) << finding->signature << "\n" << finding->description;
  }
}

}  // namespace
}  // namespace mxdiff::fuzz
