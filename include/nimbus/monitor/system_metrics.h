// Host and device readings as metrics. Device series keep the names and
// labels of NVIDIA's DCGM exporter (DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID=...,
// pci_bus_id=...,device="nvidia0",modelName=...,hostname=...}) so that dashboards made for it
// (Grafana 12239) work unchanged; host series are nimbus_host_*.
//
//   monitor::SystemMetrics system(registry);
//   system.publish(host_sampler.sample(), nvml.sample());
#pragma once

#include <string>
#include <vector>

#include "nimbus/monitor/host_sampler.h"
#include "nimbus/monitor/metric_registry.h"
#include "nimbus/monitor/nvml_sampler.h"

namespace nimbus::monitor {

// The DCGM field names this exporter emits, for the dashboard check and docs.
const std::vector<std::string>& dcgm_metric_names();

class SystemMetrics {
 public:
  // Declares the host series (at zero); device series appear with the first device reading.
  explicit SystemMetrics(MetricRegistry& registry);
  void publish(const HostReading& host, const std::vector<DeviceReading>& devices);

 private:
  MetricRegistry& registry_;
  std::string hostname_;
};

}  // namespace nimbus::monitor
