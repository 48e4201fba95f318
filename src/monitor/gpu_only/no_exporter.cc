// A GPU-only build (cmake/NimbusGpuOnly.cmake) has no HTTP server (cpp-httplib): the /metrics
// exporter of exporter.h says so when a run asks for it (runtime.monitor.port); the rest of
// monitoring (metrics.jsonl, trace.json, NVML, the step profiler) is there.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/monitor/exporter.h"

namespace nimbus::monitor {

struct MetricsExporter::Server {};

MetricsExporter::MetricsExporter(const MetricRegistry&, const std::string& address, int port) {
  throw Unavailable(
      fmt::format("cannot serve /metrics on {}:{}: this GPU-only build of nimbus has no HTTP exporter", address, port),
      "leave runtime.monitor.port unset (metrics.jsonl has the same figures), or use the full build");
}
MetricsExporter::~MetricsExporter() = default;
int MetricsExporter::port() const { return 0; }
std::string MetricsExporter::url() const { return {}; }
uint64_t MetricsExporter::requests_served() const { return 0; }

std::string http_get(const std::string& url) {
  throw Unavailable(fmt::format("cannot GET {}: this GPU-only build of nimbus has no HTTP client", url));
}

}  // namespace nimbus::monitor
