#include "tools/bench/nvml_monitor.h"

#include "gtest/gtest.h"

namespace mxdiff::bench {
namespace {

TEST(NvmlMonitorTest, AMissingLibraryIsUnavailableAndSaysWhy) {
  absl::StatusOr<std::unique_ptr<NvmlMonitor>> monitor = NvmlMonitor::Open("", "libmxdiff-no-such-nvml.so.1");
  ASSERT_FALSE(monitor.ok());
  EXPECT_EQ(monitor.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(monitor.status().message()).find("NVML not available"), std::string::npos);
  EXPECT_NE(std::string(monitor.status().message()).find("libmxdiff-no-such-nvml.so.1"), std::string::npos);
}

// A library without NVML's symbols is refused with the missing names.
TEST(NvmlMonitorTest, ALibraryWithoutTheSymbolsIsRefused) {
  absl::StatusOr<std::unique_ptr<NvmlMonitor>> monitor = NvmlMonitor::Open("", "libm.so.6");
  ASSERT_FALSE(monitor.ok());
  EXPECT_EQ(monitor.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(monitor.status().message()).find("lacks nvmlInit_v2"), std::string::npos) << monitor.status();
}

// Where the driver's NVML exists (a GPU machine), it reads plausible clocks.
TEST(NvmlMonitorTest, ReadsClocksWhereTheDriverIsInstalled) {
  absl::StatusOr<std::unique_ptr<NvmlMonitor>> monitor = NvmlMonitor::Open("");
  if (!monitor.ok()) GTEST_SKIP() << "no NVML here: " << monitor.status();
  const ClockReading reading = (*monitor)->Read();
  EXPECT_TRUE(reading.valid);
  EXPECT_GT(reading.sm_mhz, 0u);
  EXPECT_GT(reading.memory_mhz, 0u);
}

}  // namespace
}  // namespace mxdiff::bench
