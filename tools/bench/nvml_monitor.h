// GPU clocks and clock event (throttle) reasons through NVML, loaded with dlopen at run time:
// no link-time dependency, so the tool runs (and says so) where the driver's library is absent.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/bench/throttle.h"

namespace mxdiff::bench {

class NvmlMonitor final : public ClockMonitor {
 public:
  // `pci_bus_id` ("0000:1B:00.0", from cudaDeviceGetPCIBusId) picks the device; empty: index 0.
  // Unavailable (with dlerror's or NVML's text) where the library or the device is missing.
  static absl::StatusOr<std::unique_ptr<NvmlMonitor>> Open(const std::string& pci_bus_id,
                                                           const std::string& library = "libnvidia-ml.so.1");
  ~NvmlMonitor() override;
  NvmlMonitor(const NvmlMonitor&) = delete;
  NvmlMonitor& operator=(const NvmlMonitor&) = delete;

  ClockReading Read() override;
  // Temperature (C) and power (W) now, for the report's device line; negative where unread.
  int TemperatureC();
  double PowerW();
  const std::string& name() const { return name_; }
  // Which entry point gave the reasons ("nvmlDeviceGetCurrentClocksEventReasons" or the older
  // "...ThrottleReasons"); empty when neither exists (readings then carry no reasons).
  const std::string& reasons_function() const { return reasons_function_; }

 private:
  struct Api;
  NvmlMonitor(void* handle, std::unique_ptr<Api> api, void* device, std::string name, std::string reasons_function);

  void* handle_;
  std::unique_ptr<Api> api_;
  void* device_;
  std::string name_;
  std::string reasons_function_;
};

// "SM 1980 MHz, memory 2619 MHz, 45 C, 120 W, reasons none": the clocks now, for a report.
std::string DescribeClocks(NvmlMonitor& monitor);

}  // namespace mxdiff::bench
