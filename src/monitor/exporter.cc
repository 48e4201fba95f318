#include "nimbus/monitor/exporter.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/monitor/prometheus_text.h"

namespace nimbus::monitor {

// Enough threads for a Prometheus server, a few dashboards and `nimbus dmon` at once: each
// keep-alive connection holds one while it stays open.
constexpr size_t kServerThreads = 8;

struct MetricsExporter::Server {
  httplib::Server http;
  std::thread thread;
  std::string address;
  int port = 0;
  std::atomic<uint64_t> requests{0};
};

MetricsExporter::MetricsExporter(const MetricRegistry& registry, const std::string& address, int port)
    : server_(std::make_unique<Server>()) {
  Server& server = *server_;
  server.address = address;
  server.http.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  // SO_REUSEADDR only: cpp-httplib's default SO_REUSEPORT would let a second run bind the same port
  // and take half of the first one's scrapes.
  // Without it Nagle's algorithm holds the body back until the client acknowledges the headers,
  // and delayed acknowledgements make every scrape take about 40 ms.
  server.http.set_tcp_nodelay(true);
  server.http.set_socket_options([](socket_t socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.http.Get("/metrics", [&registry, &server](const httplib::Request&, httplib::Response& response) {
    response.set_content(prometheus_text(registry), kPrometheusContentType);
    server.requests.fetch_add(1, std::memory_order_relaxed);
  });
  const std::string hint = "pick another --metrics-port (0 takes any free one) or --metrics-address";
  if (port == 0) {
    server.port = server.http.bind_to_any_port(address);
    if (server.port < 0) throw Unavailable(fmt::format("metrics exporter: cannot listen on {}", address), hint);
  } else {
    if (!server.http.bind_to_port(address, port)) {
      throw Unavailable(fmt::format("metrics exporter: cannot listen on {}:{} (in use?)", address, port), hint);
    }
    server.port = port;
  }
  server.thread = std::thread([&server] { server.http.listen_after_bind(); });
  // stop() only takes effect once the accept loop runs: wait for it.
  while (!server.http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsExporter::~MetricsExporter() {
  server_->http.stop();
  server_->thread.join();
}

int MetricsExporter::port() const { return server_->port; }

std::string MetricsExporter::url() const { return fmt::format("http://{}:{}/metrics", server_->address, port()); }

uint64_t MetricsExporter::requests_served() const { return server_->requests.load(); }

std::string http_get(const std::string& url) {
  // http://host:port/path -> ("http://host:port", "/path")
  const size_t scheme_end = url.find("://");
  if (url.rfind("http://", 0) != 0) {
    throw InvalidArgument(fmt::format("{}: only http:// URLs are supported", url),
                          "give the exporter's address, e.g. http://127.0.0.1:9400/metrics");
  }
  const size_t path_start = url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  httplib::Client client(origin);
  client.set_connection_timeout(std::chrono::seconds(2));
  client.set_read_timeout(std::chrono::seconds(5));
  const httplib::Result result = client.Get(path);
  if (!result) {
    throw Unavailable(fmt::format("{}: cannot fetch it ({} error)", url, httplib::to_string(result.error())),
                      "is a run serving there (nimbus train --metrics-port), and still running or lingering?");
  }
  if (result->status != 200) throw Unavailable(fmt::format("{}: HTTP status {}", url, result->status));
  return result->body;
}

}  // namespace nimbus::monitor
