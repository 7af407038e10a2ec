#include "kernels/launch_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

constexpr Tactic kTactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 4, .swizzle = 1};

TEST(LaunchPlanTest, CountsTilesSplitsAndWorkspace) {
  const std::vector<int32_t> offsets = {0, 1, 1, 20};
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(kTactic, 3, 300, 256, offsets);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->m_tiles, 1 + 0 + 2);
  EXPECT_EQ(plan->n_tiles, 3);
  EXPECT_EQ(plan->splits, 4);
  EXPECT_EQ(plan->rows, 20);
  EXPECT_EQ(plan->semaphore_count, 9u);
  EXPECT_EQ(plan->partial_bytes, 9u * 4 * 16 * 128 * 4);
}

TEST(LaunchPlanTest, ClampsSplitsAndNeedsNoWorkspaceForOne) {
  const std::vector<int32_t> offsets = {0, 6};
  absl::StatusOr<LaunchPlan> plan =
      PlanLaunch(Tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 200}, 1, 128, 96, offsets);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->splits, 2);  // 96 = one 64-chunk and one partial
  plan = PlanLaunch(Tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 1}, 1, 128, 96, offsets);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->semaphore_count, 0u);
  EXPECT_EQ(plan->partial_bytes, 0u);
}

TEST(LaunchPlanTest, RejectsBadShapesAndTactics) {
  const std::vector<int32_t> offsets = {0, 4};
  EXPECT_EQ(PlanLaunch(kTactic, 1, 64, 48, offsets).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLaunch(kTactic, 1, 64, 0, offsets).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLaunch(kTactic, 1, 0, 64, offsets).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLaunch(kTactic, 2, 64, 64, offsets).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> descending = {0, 5, 3};
  EXPECT_EQ(PlanLaunch(kTactic, 2, 64, 64, descending).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> not_from_zero = {1, 5};
  EXPECT_EQ(PlanLaunch(kTactic, 1, 64, 64, not_from_zero).status().code(), absl::StatusCode::kInvalidArgument);
  Tactic unbuilt = kTactic;
  unbuilt.cta_n = 64;
  const absl::Status status = PlanLaunch(unbuilt, 1, 64, 64, offsets).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("16x64x32"), std::string_view::npos) << status;
}

class CheckLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LaunchPlan> planned = PlanLaunch(kTactic, 1, 256, 256, offsets_);
    ASSERT_TRUE(planned.ok());
    plan_ = *planned;
    launch_ = KernelLaunch{.shape_index = plan_.shape_index,
                           .splits = plan_.splits,
                           .groups = 1,
                           .n = 256,
                           .k = 256,
                           .m_tiles = plan_.m_tiles,
                           .n_tiles = plan_.n_tiles,
                           .row_offsets = reinterpret_cast<const int32_t*>(0x1000),
                           .activations = reinterpret_cast<const uint16_t*>(0x2000),
                           .codes = reinterpret_cast<const uint8_t*>(0x3000),
                           .scales = reinterpret_cast<const uint16_t*>(0x4000),
                           .output = reinterpret_cast<uint16_t*>(0x5000),
                           .semaphores = reinterpret_cast<int*>(0x6000),
                           .semaphore_count = plan_.semaphore_count,
                           .partials = reinterpret_cast<float*>(0x7000),
                           .partial_bytes = plan_.partial_bytes};
  }
  std::vector<int32_t> offsets_ = {0, 10};
  LaunchPlan plan_;
  KernelLaunch launch_;
};

TEST_F(CheckLaunchTest, AcceptsAConsistentLaunch) { EXPECT_TRUE(CheckLaunch(launch_, plan_).ok()); }

TEST_F(CheckLaunchTest, RejectsNullPointers) {
  launch_.output = nullptr;
  const absl::Status status = CheckLaunch(launch_, plan_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("output is null"), std::string_view::npos) << status;
}

TEST_F(CheckLaunchTest, RejectsMisalignedPointers) {
  launch_.codes = reinterpret_cast<const uint8_t*>(0x3008);
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("codes"), std::string_view::npos);
  launch_.codes = reinterpret_cast<const uint8_t*>(0x3000);
  launch_.activations = reinterpret_cast<const uint16_t*>(0x2002);
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("activations"), std::string_view::npos);
}

TEST_F(CheckLaunchTest, RejectsASmallWorkspace) {
  launch_.partial_bytes = plan_.partial_bytes - 4;
  absl::Status status = CheckLaunch(launch_, plan_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("workspace too small"), std::string_view::npos) << status;
  launch_.partial_bytes = plan_.partial_bytes;
  launch_.semaphore_count = plan_.semaphore_count - 1;
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("workspace too small"), std::string_view::npos);
  launch_.semaphore_count = plan_.semaphore_count;
  launch_.partials = nullptr;
  EXPECT_EQ(CheckLaunch(launch_, plan_).code(), absl::StatusCode::kInvalidArgument);
  launch_.partials = reinterpret_cast<float*>(0x7004);
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("aligned"), std::string_view::npos);
}

TEST_F(CheckLaunchTest, ChecksTheOptionalGatherAndRecordPointers) {
  launch_.record = reinterpret_cast<uint16_t*>(0x9008);
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("only for a gathered launch"), std::string_view::npos);
  launch_.tile_routing = TileRouting{.tokens = reinterpret_cast<const int32_t*>(0xA000),
                                     .expert_ids = reinterpret_cast<const int32_t*>(0xB000),
                                     .max_tokens = 4,
                                     .top_k = 6,
                                     .experts = 256,
                                     .shared_expert = 1,
                                     .other_cta_m = 8,
                                     .other_capacity = 28};
  EXPECT_TRUE(CheckLaunch(launch_, plan_).ok()) << CheckLaunch(launch_, plan_);
  launch_.tile_routing.max_tokens = 11;  // 66 entries: more than one CTA's threads schedule
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("one CTA schedules them"), std::string_view::npos);
  launch_.tile_routing.max_tokens = 4;
  launch_.tile_routing.tokens = nullptr;
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("tile_routing tokens is null"), std::string_view::npos);
  launch_.tile_routing = {};
  launch_.record = nullptr;
  launch_.row_source = reinterpret_cast<const int32_t*>(0x8002);
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("row_source"), std::string_view::npos);
  launch_.row_source = reinterpret_cast<const int32_t*>(0x8000);
  launch_.record = reinterpret_cast<uint16_t*>(0x9004);  // written 8 bytes at a time
  EXPECT_NE(CheckLaunch(launch_, plan_).message().find("record"), std::string_view::npos);
  launch_.record = reinterpret_cast<uint16_t*>(0x9008);
  EXPECT_TRUE(CheckLaunch(launch_, plan_).ok());
}

TEST_F(CheckLaunchTest, RejectsFieldsThatDisagreeWithThePlan) {
  launch_.splits = plan_.splits + 1;
  EXPECT_EQ(CheckLaunch(launch_, plan_).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxdiff
