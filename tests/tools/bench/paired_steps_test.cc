// The steps around a paired protocol's timing (tools/bench/paired_steps.h), over fake arms.
#include "tools/bench/paired_steps.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace mxdiff::bench {
namespace {

class RecordingArm final : public BenchArm {
 public:
  RecordingArm(std::string label, std::vector<std::string>& log, uint16_t value_on_set_1)
      : label_(std::move(label)), log_(log), value_on_set_1_(value_on_set_1) {}
  std::string label() const override { return label_; }
  std::string route() const override { return label_ + "-route"; }
  absl::StatusOr<std::vector<uint16_t>> RunSet(int index) override {
    log_.push_back(label_ + " set " + std::to_string(index));
    return std::vector<uint16_t>(4, index == 1 ? value_on_set_1_ : uint16_t(0));
  }
  absl::Status WarmUp(int passes) override {
    log_.push_back(label_ + " warm " + std::to_string(passes));
    return absl::OkStatus();
  }
  absl::Status PrepareTiming(int capture_mode, bool) override {
    log_.push_back(label_ + " capture " + std::to_string(capture_mode));
    return fail_capture ? absl::InternalError("no graph") : absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint16_t>> LastOutput() override { return last_output; }
  int last_set() const override { return 0; }
  absl::StatusOr<ReplayTime> TimeReplay() override { return absl::UnimplementedError("untimed"); }
  bool fail_capture = false;
  std::vector<uint16_t> last_output = std::vector<uint16_t>(4, 0);

 private:
  std::string label_;
  std::vector<std::string>& log_;
  uint16_t value_on_set_1_;
};

TEST(PairedSteps, EqualBitsOnEverySetRecordRoutes) {
  std::vector<std::string> log;
  RecordingArm a("A", log, 7), b("B", log, 7);
  ExperimentReport e;
  EXPECT_TRUE(CheckBitsBeforeTiming(e, a, b, 3, 2, "set", "outputs"));
  EXPECT_EQ(log, (std::vector<std::string>{"A set 0", "B set 0", "A set 1", "B set 1", "A set 2", "B set 2"}));
  EXPECT_TRUE(e.bits_checked && e.bits_equal);
  EXPECT_EQ(e.a.route, "A-route");
  EXPECT_EQ(e.b.route, "B-route");
  EXPECT_TRUE(e.error.empty());
}

TEST(PairedSteps, FirstDifferenceStopsAndNamesTheUnit) {
  std::vector<std::string> log;
  RecordingArm a("A", log, 7), b("B", log, 8);
  ExperimentReport e;
  EXPECT_FALSE(CheckBitsBeforeTiming(e, a, b, 3, 2, "routing", "layer outputs"));
  EXPECT_EQ(log.size(), 4u);  // set 2 never ran
  EXPECT_TRUE(e.bits_checked);
  EXPECT_FALSE(e.bits_equal);
  EXPECT_EQ(e.bits_detail.rfind("routing 1: ", 0), 0u) << e.bits_detail;
  EXPECT_EQ(e.error, "layer outputs differ: not timed (no speed claim comes with a bit change)");
}

TEST(PairedSteps, WarmUpAndCaptureInTheExperimentsOrder) {
  std::vector<std::string> log;
  RecordingArm a("A", log, 0), b("B", log, 0);
  ExperimentReport e;
  EXPECT_TRUE(WarmUpAndPrepare(e, a, b, 5, 1, /*b_first=*/true));
  EXPECT_EQ(log, (std::vector<std::string>{"B warm 5", "B capture 1", "A warm 5", "A capture 1"}));
  log.clear();
  b.fail_capture = true;
  EXPECT_FALSE(WarmUpAndPrepare(e, a, b, 2, 1, /*b_first=*/false));
  EXPECT_EQ(log, (std::vector<std::string>{"A warm 2", "A capture 1", "B warm 2", "B capture 1"}));
  EXPECT_EQ(e.error, "no graph");
}

TEST(PairedSteps, LastOutputsComparedAfterTiming) {
  std::vector<std::string> log;
  RecordingArm a("A", log, 0), b("B", log, 0);
  ExperimentReport e = PairedReport(Protocol::kSameArm, Pattern::kAbba, 3, ArmSpec{}, ArmSpec{});
  EXPECT_EQ(e.b.label, e.a.label + "'");
  e.bits_equal = true;
  CheckLastOutputs(e, a, b, 2, "routing", "layer outputs", /*check_unwritten=*/false, /*is_error=*/false);
  EXPECT_TRUE(e.bits_checked && e.bits_equal && e.error.empty());
  b.last_output[3] = 1;
  CheckLastOutputs(e, a, b, 2, "routing", "layer outputs", /*check_unwritten=*/false, /*is_error=*/true);
  EXPECT_FALSE(e.bits_equal);
  EXPECT_EQ(e.bits_detail.rfind("after timing, routing 0: ", 0), 0u) << e.bits_detail;
  EXPECT_EQ(e.error, "layer outputs differ after timing: no speed claim");
}

}  // namespace
}  // namespace mxdiff::bench
