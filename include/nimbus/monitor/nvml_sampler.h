// Device sampler over NVML, loaded at run time with dlopen("libnvidia-ml.so.1")
// so that no build needs a driver. Readings carry the figures `nvidia-smi
// dmon` shows, from the same NVML calls, and the identity DCGM's exporter
// labels its series with.
//
//   monitor::NvmlSampler nvml;
//   if (!nvml.available()) std::cerr << nvml.unavailable_reason() << "\n";
//   for (const monitor::DeviceReading& d : nvml.sample()) d.sm_util_percent;
//
// A figure the device does not support (or that NVML refuses) is NaN: dmon
// prints it as '-' and the exporter leaves its series out.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace nimbus::monitor {

// Figures are NaN until read, and stay NaN where the device does not support them.
struct DeviceReading {
  static constexpr double kUnread = std::numeric_limits<double>::quiet_NaN();
  int index = 0;
  std::string name, uuid, pci_bus_id;
  // Percent of the last sample period with a kernel running / device memory being read or written.
  double sm_util_percent = kUnread, mem_util_percent = kUnread, enc_util_percent = kUnread, dec_util_percent = kUnread;
  double memory_used_bytes = kUnread, memory_total_bytes = kUnread;
  double power_watts = kUnread;
  double gpu_temp_celsius = kUnread, memory_temp_celsius = kUnread;
  double sm_clock_mhz = kUnread, memory_clock_mhz = kUnread;
  double pcie_rx_bytes_per_second = kUnread, pcie_tx_bytes_per_second = kUnread;
  double energy_millijoules = kUnread;  // since the driver loaded
};

class NvmlSampler {
 public:
  // Loads and initializes NVML; when that fails the sampler is unavailable (never throws).
  NvmlSampler();
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  bool available() const;
  // Why not ("libnvidia-ml.so.1 not found: no NVIDIA driver on this machine"); empty when available.
  const std::string& unavailable_reason() const;
  std::string driver_version() const;
  int device_count() const;
  // One reading per device (empty when unavailable).
  std::vector<DeviceReading> sample();

 private:
  struct Library;
  std::unique_ptr<Library> library_;
  std::string unavailable_reason_;
};

}  // namespace nimbus::monitor
