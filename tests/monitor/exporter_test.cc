// The /metrics exporter over HTTP, and the host and device samplers.
#include "nimbus/monitor/exporter.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/monitor/host_sampler.h"
#include "nimbus/monitor/nvml_sampler.h"
#include "nimbus/monitor/prometheus_text.h"

namespace nimbus::monitor {
namespace {

using ::testing::StartsWith;

TEST(MetricsExporter, ServesTheRegistryOnMetricsOnly) {
  MetricRegistry registry;
  Counter& counter = registry.counter("demo_total", "Demo.");
  MetricsExporter exporter(registry, "127.0.0.1", 0);
  ASSERT_GT(exporter.port(), 0);
  EXPECT_EQ(http_get(exporter.url()), prometheus_text(registry));
  counter.add(5);
  EXPECT_NE(http_get(exporter.url()).find("demo_total 5\n"), std::string::npos);
  EXPECT_EQ(exporter.requests_served(), 2u);
  const std::string other = "http://127.0.0.1:" + std::to_string(exporter.port()) + "/";
  EXPECT_THROW(http_get(other), Unavailable);  // 404
}

TEST(MetricsExporter, PortInUseIsAClearError) {
  MetricRegistry registry;
  MetricsExporter first(registry, "127.0.0.1", 0);
  try {
    MetricsExporter second(registry, "127.0.0.1", first.port());
    FAIL() << "bound a port in use";
  } catch (const Unavailable& error) {
    EXPECT_NE(std::string(error.what()).find(std::to_string(first.port())), std::string::npos) << error.what();
  }
}

// A client socket connected to 127.0.0.1:port that has sent `bytes`.
int connect_and_send(int port, const std::string& bytes) {
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in server{.sin_family = AF_INET, .sin_port = htons(static_cast<uint16_t>(port))};
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&server), sizeof server), 0);
  EXPECT_EQ(send(client, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  return client;
}

// Everything the server sends until it closes the connection.
std::string read_to_end(int client) {
  std::string answer;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = recv(client, buffer, sizeof buffer, 0)) > 0) answer.append(buffer, static_cast<size_t>(got));
  close(client);
  return answer;
}

TEST(MetricsExporter, HalfSentRequestsHeldOpenDoNotDelayAScrape) {
  MetricRegistry registry;
  registry.counter("demo_total", "Demo.");
  MetricsExporter exporter(registry, "127.0.0.1", 0);
  // With a thread per connection, these held every thread until their time-outs (8 s and more).
  std::vector<int> held;
  for (int i = 0; i < 200; ++i)
    held.push_back(connect_and_send(exporter.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(exporter.url()), prometheus_text(registry));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  for (int client : held) close(client);
}

TEST(MetricsExporter, OverLongOrMalformedRequestsGetAnAnswerAndAreClosed) {
  MetricRegistry registry;
  MetricsExporter exporter(registry, "127.0.0.1", 0);
  const std::string long_line = "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n";
  EXPECT_THAT(read_to_end(connect_and_send(exporter.port(), long_line)), StartsWith("HTTP/1.1 414 "));
  const std::string long_headers = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'b') + "\r\n\r\n";
  EXPECT_THAT(read_to_end(connect_and_send(exporter.port(), long_headers)), StartsWith("HTTP/1.1 431 "));
  EXPECT_THAT(read_to_end(connect_and_send(exporter.port(), "NONSENSE\r\n\r\n")), StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(read_to_end(connect_and_send(exporter.port(), "POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")),
              StartsWith("HTTP/1.1 405 "));
  // HEAD: the headers of the answer, no body.
  const std::string head = read_to_end(connect_and_send(exporter.port(), "HEAD /metrics HTTP/1.0\r\n\r\n"));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << head;
  EXPECT_EQ(exporter.requests_served(), 1u);
}

TEST(MetricsExporter, UnreachableUrlIsUnavailable) {
  EXPECT_THROW(http_get("http://127.0.0.1:1/metrics"), Unavailable);
  EXPECT_THROW(http_get("https://example.invalid/metrics"), InvalidArgument);
}

TEST(HostSampler, SeesABusyNamedThreadAndResidentMemory) {
  HostSampler sampler;
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    pthread_setname_np(pthread_self(), "busy-worker");
    while (!stop.load()) {
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const HostReading reading = sampler.sample();
  stop = true;
  spinner.join();
  ASSERT_TRUE(reading.thread_cpu_ratio.count("busy-worker")) << "the named thread was not seen";
  // A spinning thread gets its share of a core even on a loaded machine (a sixth of one at load 12 on
  // two cores), far more than this thread, which sleeps meanwhile.
  const double busy = reading.thread_cpu_ratio.at("busy-worker");
  EXPECT_GT(busy, 0.05);
  double sleeping = 0;
  for (const auto& [name, ratio] : reading.thread_cpu_ratio) {
    if (name != "busy-worker") sleeping += ratio;
  }
  EXPECT_GT(busy, 5 * sleeping);
  EXPECT_GE(reading.process_cpu_ratio, busy * 0.9);
  EXPECT_GT(reading.resident_bytes, 1u << 20);
  EXPECT_GT(reading.system_memory_total_bytes, reading.system_memory_available_bytes);
  EXPECT_GT(reading.cores, 0);
}

TEST(NvmlSampler, SaysWhyWhenThereIsNoDriver) {
  NvmlSampler nvml;
  if (nvml.available()) {
    // With a driver: one reading per device with its identity and memory.
    const std::vector<DeviceReading> readings = nvml.sample();
    ASSERT_EQ(int(readings.size()), nvml.device_count());
    for (const DeviceReading& r : readings) {
      EXPECT_FALSE(r.uuid.empty());
      EXPECT_GT(r.memory_total_bytes, 0);
    }
    return;
  }
  EXPECT_NE(nvml.unavailable_reason().find("NVML"), std::string::npos) << nvml.unavailable_reason();
  EXPECT_TRUE(nvml.sample().empty());
  EXPECT_EQ(nvml.device_count(), 0);
}

}  // namespace
}  // namespace nimbus::monitor
