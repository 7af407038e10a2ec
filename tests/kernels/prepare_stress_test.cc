// Weights must have landed when Prepare returns, on every stream the layer is launched on, and
// launches on several streams at once must not share split-K state (tests/kernels/prepare_stress.h).
#include "gtest/gtest.h"
#include "tests/kernels/gpu_fixture.h"
#include "tests/kernels/prepare_stress.h"

namespace mxdiff::testing {
namespace {

using PrepareStressTest = GpuTest;

TEST_F(PrepareStressTest, EveryLaunchRightAfterPrepareOnFourStreamsUnderCopyLoadEqualsTheReference) {
  const PrepareStressOptions options{
      .seed = TestSeed("PrepareStressTest"), .streams = 4, .launches_per_stream = 2, .rounds = 24, .load_threads = 1};
  absl::StatusOr<PrepareStressReport> report = RunPrepareStress(runner(), options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->launches, 24 * 4 * 2);
  EXPECT_EQ(report->mismatched_launches, 0) << report->first_mismatch;
}

}  // namespace
}  // namespace mxdiff::testing
