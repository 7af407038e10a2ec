#include "tools/bench/nvml_monitor.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

#include "fmt/format.h"

namespace mxdiff::bench {
namespace {

// nvml.h's types, as far as these calls need them: nvmlReturn_t is an int-sized enum with 0 for
// success, nvmlDevice_t an opaque pointer, the clock and temperature selectors small enums.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
constexpr int kNvmlClockMem = 2;
constexpr int kNvmlTemperatureGpu = 0;

}  // namespace

struct NvmlMonitor::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*by_pci)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned*) = nullptr;

  std::string Error(NvmlReturn code) const {
    return error_string != nullptr ? fmt::format("{} ({})", error_string(code), code) : fmt::format("error {}", code);
  }
};

absl::StatusOr<std::unique_ptr<NvmlMonitor>> NvmlMonitor::Open(const std::string& pci_bus_id,
                                                               const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::UnavailableError(fmt::format("NVML not available: {}", error != nullptr ? error : library));
  }
  auto api = std::make_unique<Api>();
  auto bind = [handle](auto& function, const char* symbol) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, symbol));
    return function != nullptr;
  };
  std::string missing;
  for (auto [ok, symbol] : {std::pair{bind(api->init, "nvmlInit_v2"), "nvmlInit_v2"},
                            std::pair{bind(api->shutdown, "nvmlShutdown"), "nvmlShutdown"},
                            std::pair{bind(api->by_pci, "nvmlDeviceGetHandleByPciBusId_v2"),
                                      "nvmlDeviceGetHandleByPciBusId_v2"},
                            std::pair{bind(api->by_index, "nvmlDeviceGetHandleByIndex_v2"),
                                      "nvmlDeviceGetHandleByIndex_v2"},
                            std::pair{bind(api->clock, "nvmlDeviceGetClockInfo"), "nvmlDeviceGetClockInfo"}}) {
    if (!ok) missing += fmt::format(" {}", symbol);
  }
  if (!missing.empty()) {
    dlclose(handle);
    return absl::UnavailableError(fmt::format("NVML {} lacks{}", library, missing));
  }
  bind(api->error_string, "nvmlErrorString");
  bind(api->name, "nvmlDeviceGetName");
  bind(api->temperature, "nvmlDeviceGetTemperature");
  bind(api->power, "nvmlDeviceGetPowerUsage");
  std::string reasons_function = "nvmlDeviceGetCurrentClocksEventReasons";
  if (!bind(api->reasons, reasons_function.c_str())) {
    reasons_function = "nvmlDeviceGetCurrentClocksThrottleReasons";
    if (!bind(api->reasons, reasons_function.c_str())) reasons_function.clear();
  }
  if (NvmlReturn code = api->init(); code != kNvmlSuccess) {
    const std::string error = api->Error(code);
    dlclose(handle);
    return absl::UnavailableError(fmt::format("nvmlInit_v2: {}", error));
  }
  NvmlDevice device = nullptr;
  const NvmlReturn code = pci_bus_id.empty() ? api->by_index(0, &device) : api->by_pci(pci_bus_id.c_str(), &device);
  if (code != kNvmlSuccess) {
    const std::string error = api->Error(code);
    api->shutdown();
    dlclose(handle);
    return absl::UnavailableError(fmt::format("NVML has no device {}: {}", pci_bus_id.empty() ? "0" : pci_bus_id, error));
  }
  char name[96] = {0};
  if (api->name == nullptr || api->name(device, name, sizeof name) != kNvmlSuccess) name[0] = '\0';
  name[sizeof name - 1] = '\0';
  return std::unique_ptr<NvmlMonitor>(
      new NvmlMonitor(handle, std::move(api), device, name, std::move(reasons_function)));
}

NvmlMonitor::NvmlMonitor(void* handle, std::unique_ptr<Api> api, void* device, std::string name,
                         std::string reasons_function)
    : handle_(handle),
      api_(std::move(api)),
      device_(device),
      name_(std::move(name)),
      reasons_function_(std::move(reasons_function)) {}

NvmlMonitor::~NvmlMonitor() {
  api_->shutdown();
  dlclose(handle_);
}

ClockReading NvmlMonitor::Read() {
  ClockReading reading;
  unsigned long long reasons = 0;
  reading.valid = api_->clock(device_, kNvmlClockSm, &reading.sm_mhz) == kNvmlSuccess &&
                  api_->clock(device_, kNvmlClockMem, &reading.memory_mhz) == kNvmlSuccess &&
                  (api_->reasons == nullptr || api_->reasons(device_, &reasons) == kNvmlSuccess);
  reading.reasons = reasons;
  return reading;
}

int NvmlMonitor::TemperatureC() {
  unsigned celsius = 0;
  if (api_->temperature == nullptr || api_->temperature(device_, kNvmlTemperatureGpu, &celsius) != kNvmlSuccess) {
    return -1;
  }
  return int(celsius);
}

double NvmlMonitor::PowerW() {
  unsigned milliwatts = 0;
  if (api_->power == nullptr || api_->power(device_, &milliwatts) != kNvmlSuccess) return -1;
  return milliwatts * 1e-3;
}

std::string DescribeClocks(NvmlMonitor& monitor) {
  const ClockReading r = monitor.Read();
  return fmt::format("SM {} MHz, memory {} MHz, {} C, {:.0f} W, reasons {}", r.sm_mhz, r.memory_mhz,
                     monitor.TemperatureC(), monitor.PowerW(), ReasonNames(r.reasons));
}

}  // namespace mxdiff::bench
