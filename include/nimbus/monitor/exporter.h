// Serves a MetricRegistry on /metrics in the Prometheus text format, over
// HTTP (cpp-httplib), from its own threads, until destroyed.
//
//   monitor::MetricsExporter exporter(registry, "127.0.0.1", 9400);
//   // curl http://127.0.0.1:9400/metrics
//
// Read-only: only GET (and HEAD) /metrics is served; anything else is a 404.
// A request costs one serialization of the registry (its size is fixed by
// the metrics declared, not by the run's length), so scrapes stay cheap
// however long training runs. One thread serves every connection without
// blocking on any; a client gets a few seconds to send its request and take
// the answer, and past a cap on open connections the one that has waited
// longest is closed, so slow or hostile clients cannot hold off a scrape
// (docs/monitoring.md, "Limits").
#pragma once

#include <memory>
#include <string>

#include "nimbus/monitor/metric_registry.h"

namespace nimbus::monitor {

class MetricsExporter {
 public:
  // Binds `address`:`port` (port 0: any free port) and starts serving. Throws Unavailable naming
  // the address and port when it cannot bind (in use, or not an address of this machine).
  MetricsExporter(const MetricRegistry& registry, const std::string& address, int port);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  int port() const;
  // http://ADDRESS:PORT/metrics
  std::string url() const;
  // /metrics requests answered so far.
  uint64_t requests_served() const;

 private:
  struct Server;
  std::unique_ptr<Server> server_;
};

// GETs `url` (http://host:port/path) and returns the body; throws Unavailable naming the url
// when the server cannot be reached or does not answer 200.
std::string http_get(const std::string& url);

}  // namespace nimbus::monitor
