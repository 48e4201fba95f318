#include "nimbus/monitor/nvml_sampler.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace nimbus::monitor {

namespace {

// The few NVML types and constants used here, as nvml.h declares them (the ABI is stable;
// including nvml.h would tie the build to the CUDA toolkit).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr int kTemperatureGpu = 0;                   // NVML_TEMPERATURE_GPU
constexpr int kClockGraphics = 0, kClockMemory = 2;  // NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM
constexpr int kPcieTxBytes = 0, kPcieRxBytes = 1;    // NVML_PCIE_UTIL_TX_BYTES, _RX_BYTES
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

struct NvmlSampler::Library {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*encoder_utilization)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*decoder_utilization)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*pcie_throughput)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;

  template <typename F>
  bool load(F& function, const char* symbol) {
    function = reinterpret_cast<F>(dlsym(handle, symbol));
    return function != nullptr;
  }
};

NvmlSampler::NvmlSampler() {
  auto library = std::make_unique<Library>();
  library->handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library->handle == nullptr) {
    unavailable_reason_ = "NVML (libnvidia-ml.so.1) not found: no NVIDIA driver here; device metrics are off";
    return;
  }
  Library& l = *library;
  // The _v2/_v3 names are the current entry points; the optional ones may be absent on old drivers.
  const bool required = l.load(l.init, "nvmlInit_v2") && l.load(l.shutdown, "nvmlShutdown") &&
                        l.load(l.device_count, "nvmlDeviceGetCount_v2") &&
                        l.load(l.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  if (!required) {
    unavailable_reason_ =
        "NVML found but lacks nvmlInit_v2 / nvmlDeviceGetCount_v2: driver too old; device metrics are off";
    dlclose(l.handle);
    return;
  }
  l.load(l.name, "nvmlDeviceGetName");
  l.load(l.uuid, "nvmlDeviceGetUUID");
  l.load(l.pci_info, "nvmlDeviceGetPciInfo_v3");
  l.load(l.utilization, "nvmlDeviceGetUtilizationRates");
  l.load(l.encoder_utilization, "nvmlDeviceGetEncoderUtilization");
  l.load(l.decoder_utilization, "nvmlDeviceGetDecoderUtilization");
  l.load(l.memory, "nvmlDeviceGetMemoryInfo");
  l.load(l.power, "nvmlDeviceGetPowerUsage");
  l.load(l.temperature, "nvmlDeviceGetTemperature");
  l.load(l.clock, "nvmlDeviceGetClockInfo");
  l.load(l.pcie_throughput, "nvmlDeviceGetPcieThroughput");
  l.load(l.energy, "nvmlDeviceGetTotalEnergyConsumption");
  l.load(l.driver_version, "nvmlSystemGetDriverVersion");
  if (const nvmlReturn_t status = l.init(); status != kNvmlSuccess) {
    unavailable_reason_ = fmt::format("nvmlInit_v2 failed (NVML error {}); device metrics are off", status);
    dlclose(l.handle);
    return;
  }
  library_ = std::move(library);
}

NvmlSampler::~NvmlSampler() {
  if (!library_) return;
  library_->shutdown();
  dlclose(library_->handle);
}

bool NvmlSampler::available() const { return library_ != nullptr; }

const std::string& NvmlSampler::unavailable_reason() const { return unavailable_reason_; }

std::string NvmlSampler::driver_version() const {
  char text[96] = {};
  if (!library_ || !library_->driver_version || library_->driver_version(text, sizeof text) != kNvmlSuccess) return {};
  return text;
}

int NvmlSampler::device_count() const {
  unsigned int count = 0;
  if (!library_ || library_->device_count(&count) != kNvmlSuccess) return 0;
  return static_cast<int>(count);
}

std::vector<DeviceReading> NvmlSampler::sample() {
  std::vector<DeviceReading> readings;
  if (!library_) return readings;
  const Library& l = *library_;
  const int count = device_count();
  for (int index = 0; index < count; ++index) {
    nvmlDevice_t device = nullptr;
    if (l.handle_by_index(static_cast<unsigned int>(index), &device) != kNvmlSuccess) continue;
    DeviceReading r;
    r.index = index;
    char text[96] = {};
    if (l.name && l.name(device, text, sizeof text) == kNvmlSuccess) r.name = text;
    if (l.uuid && l.uuid(device, text, sizeof text) == kNvmlSuccess) r.uuid = text;
    nvmlPciInfo_t pci{};
    if (l.pci_info && l.pci_info(device, &pci) == kNvmlSuccess) r.pci_bus_id = pci.busId;
    // Reads one unsigned figure; NaN when the call is missing or fails (unsupported).
    auto read = [](auto call, double scale) {
      unsigned int value = 0;
      return call(&value) ? double(value) * scale : kNaN;
    };
    nvmlUtilization_t utilization{};
    const bool has_utilization = l.utilization && l.utilization(device, &utilization) == kNvmlSuccess;
    r.sm_util_percent = has_utilization ? utilization.gpu : kNaN;
    r.mem_util_percent = has_utilization ? utilization.memory : kNaN;
    unsigned int period = 0;
    r.enc_util_percent = read(
        [&](unsigned int* v) { return l.encoder_utilization && l.encoder_utilization(device, v, &period) == 0; }, 1);
    r.dec_util_percent = read(
        [&](unsigned int* v) { return l.decoder_utilization && l.decoder_utilization(device, v, &period) == 0; }, 1);
    nvmlMemory_t memory{};
    const bool has_memory = l.memory && l.memory(device, &memory) == kNvmlSuccess;
    r.memory_used_bytes = has_memory ? double(memory.used) : kNaN;
    r.memory_total_bytes = has_memory ? double(memory.total) : kNaN;
    // NVML reports milliwatts, and PCIe throughput in KB/s.
    r.power_watts = read([&](unsigned int* v) { return l.power && l.power(device, v) == 0; }, 1e-3);
    r.gpu_temp_celsius =
        read([&](unsigned int* v) { return l.temperature && l.temperature(device, kTemperatureGpu, v) == 0; }, 1);
    r.memory_temp_celsius = kNaN;  // needs nvmlDeviceGetFieldValues; dmon prints '-' on most boards too
    r.sm_clock_mhz = read([&](unsigned int* v) { return l.clock && l.clock(device, kClockGraphics, v) == 0; }, 1);
    r.memory_clock_mhz = read([&](unsigned int* v) { return l.clock && l.clock(device, kClockMemory, v) == 0; }, 1);
    r.pcie_rx_bytes_per_second = read(
        [&](unsigned int* v) { return l.pcie_throughput && l.pcie_throughput(device, kPcieRxBytes, v) == 0; }, 1e3);
    r.pcie_tx_bytes_per_second = read(
        [&](unsigned int* v) { return l.pcie_throughput && l.pcie_throughput(device, kPcieTxBytes, v) == 0; }, 1e3);
    unsigned long long energy = 0;
    r.energy_millijoules = l.energy && l.energy(device, &energy) == kNvmlSuccess ? double(energy) : kNaN;
    readings.push_back(std::move(r));
  }
  return readings;
}

}  // namespace nimbus::monitor
