#include "tools/bench/throttle.h"

#include "fmt/format.h"

namespace mxdiff::bench {

std::string ReasonNames(uint64_t reasons) {
  static constexpr struct {
    uint64_t bit;
    const char* name;
  } kNames[] = {{kReasonGpuIdle, "gpu-idle"},
                {kReasonApplicationsClocksSetting, "applications-clocks"},
                {kReasonSwPowerCap, "sw-power-cap"},
                {kReasonHwSlowdown, "hw-slowdown"},
                {kReasonSyncBoost, "sync-boost"},
                {kReasonSwThermalSlowdown, "sw-thermal"},
                {kReasonHwThermalSlowdown, "hw-thermal"},
                {kReasonHwPowerBrakeSlowdown, "hw-power-brake"},
                {kReasonDisplayClockSetting, "display-clocks"}};
  if (reasons == 0) return "none";
  std::string text;
  uint64_t rest = reasons;
  for (const auto& entry : kNames) {
    if ((reasons & entry.bit) == 0) continue;
    text += fmt::format("{}{}", text.empty() ? "" : "|", entry.name);
    rest &= ~entry.bit;
  }
  if (rest != 0) text += fmt::format("{}{:#x}", text.empty() ? "" : "|", rest);
  return text;
}

}  // namespace mxdiff::bench
