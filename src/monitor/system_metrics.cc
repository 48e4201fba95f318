#include "nimbus/monitor/system_metrics.h"

#include <unistd.h>

#include <cmath>

namespace nimbus::monitor {

namespace {

struct DcgmField {
  const char* name;
  const char* help;
  double DeviceReading::*value;
  double scale;  // reading unit -> DCGM's unit
};

// DCGM's units: utilization %, framebuffer MiB, power W, temperature C, clocks MHz, PCIe bytes/s.
const std::vector<DcgmField>& dcgm_gauges() {
  static const std::vector<DcgmField> fields = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", &DeviceReading::sm_util_percent, 1},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", &DeviceReading::mem_util_percent, 1},
      {"DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", &DeviceReading::enc_util_percent, 1},
      {"DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", &DeviceReading::dec_util_percent, 1},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", &DeviceReading::memory_used_bytes, 1.0 / (1 << 20)},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", &DeviceReading::power_watts, 1},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", &DeviceReading::gpu_temp_celsius, 1},
      {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", &DeviceReading::memory_temp_celsius, 1},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", &DeviceReading::sm_clock_mhz, 1},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", &DeviceReading::memory_clock_mhz, 1},
      {"DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus (in B/s).",
       &DeviceReading::pcie_rx_bytes_per_second, 1},
      {"DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus (in B/s).",
       &DeviceReading::pcie_tx_bytes_per_second, 1},
  };
  return fields;
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

const std::vector<std::string>& dcgm_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const DcgmField& field : dcgm_gauges()) all.emplace_back(field.name);
    all.emplace_back("DCGM_FI_DEV_FB_FREE");
    all.emplace_back("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
    return all;
  }();
  return names;
}

SystemMetrics::SystemMetrics(MetricRegistry& registry) : registry_(registry), hostname_(hostname()) {
  publish(HostReading{}, {});
}

void SystemMetrics::publish(const HostReading& host, const std::vector<DeviceReading>& devices) {
  MetricRegistry& r = registry_;
  r.counter("nimbus_host_process_cpu_seconds_total", "CPU time of this process (user + system).")
      .advance_to(host.process_cpu_seconds);
  r.gauge("nimbus_host_process_cpu_ratio",
          "CPU seconds per second of this process over the last sample (1 = one core).")
      .set(host.process_cpu_ratio);
  r.gauge("nimbus_host_cores", "CPU cores of this machine.").set(host.cores);
  r.gauge("nimbus_host_resident_memory_bytes", "Resident memory of this process.").set(double(host.resident_bytes));
  r.gauge("nimbus_host_memory_total_bytes", "Memory of this machine.").set(double(host.system_memory_total_bytes));
  r.gauge("nimbus_host_memory_available_bytes", "Memory available to new processes on this machine.")
      .set(double(host.system_memory_available_bytes));
  for (const auto& [thread, ratio] : host.thread_cpu_ratio) {
    r.gauge("nimbus_host_thread_cpu_ratio",
            "CPU seconds per second over the last sample of this process's threads, by thread name.",
            {{"thread", thread}})
        .set(ratio);
    r.gauge("nimbus_host_threads", "Threads of this process, by name.", {{"thread", thread}})
        .set(host.thread_count.at(thread));
  }

  for (const DeviceReading& device : devices) {
    const Labels labels = {{"gpu", std::to_string(device.index)},
                           {"UUID", device.uuid},
                           {"pci_bus_id", device.pci_bus_id},
                           {"device", "nvidia" + std::to_string(device.index)},
                           {"modelName", device.name},
                           {"hostname", hostname_}};
    for (const DcgmField& field : dcgm_gauges()) {
      const double value = device.*field.value;
      if (!std::isnan(value)) r.gauge(field.name, field.help, labels).set(value * field.scale);
    }
    if (!std::isnan(device.memory_total_bytes)) {
      r.gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels)
          .set((device.memory_total_bytes - device.memory_used_bytes) / (1 << 20));
    }
    if (!std::isnan(device.energy_millijoules)) {
      r.counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", labels)
          .advance_to(device.energy_millijoules);
    }
  }
}

}  // namespace nimbus::monitor
