// Clock readings and NVML's clock event ("throttle") reason bits, as plain data (the values of
// nvml.h's nvmlClocksEventReason*; the header itself is not needed). CUDA- and NVML-free.
#pragma once

#include <cstdint>
#include <string>

namespace mxdiff::bench {

inline constexpr uint64_t kReasonGpuIdle = 0x1;
inline constexpr uint64_t kReasonApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kReasonSwPowerCap = 0x4;
inline constexpr uint64_t kReasonHwSlowdown = 0x8;
inline constexpr uint64_t kReasonSyncBoost = 0x10;
inline constexpr uint64_t kReasonSwThermalSlowdown = 0x20;
inline constexpr uint64_t kReasonHwThermalSlowdown = 0x40;
inline constexpr uint64_t kReasonHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kReasonDisplayClockSetting = 0x100;

// The reasons that mean the clocks were held down while work ran: power cap, thermal and
// hardware slowdowns. Idle, application clocks, sync boost and display settings are not.
inline constexpr uint64_t kThrottleMask = kReasonSwPowerCap | kReasonHwSlowdown | kReasonSwThermalSlowdown |
                                          kReasonHwThermalSlowdown | kReasonHwPowerBrakeSlowdown;

struct ClockReading {
  bool valid = false;  // false: no monitor, or the read failed
  unsigned sm_mhz = 0;
  unsigned memory_mhz = 0;
  uint64_t reasons = 0;
};

inline bool IsThrottled(uint64_t reasons, uint64_t mask = kThrottleMask) { return (reasons & mask) != 0; }

// "sw-power-cap|hw-slowdown", "none" for 0; unknown bits as hex.
std::string ReasonNames(uint64_t reasons);

// Source of readings during a run (NVML on a GPU machine; fakes in tests).
class ClockMonitor {
 public:
  virtual ~ClockMonitor() = default;
  virtual ClockReading Read() = 0;
};

}  // namespace mxdiff::bench
