#include "nimbus/monitor/exporter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <list>
#include <thread>

#include "nimbus/base/ascii_case.h"
#include "nimbus/base/error.h"
#include "nimbus/monitor/prometheus_text.h"

namespace nimbus::monitor {
namespace {

using Clock = std::chrono::steady_clock;

// The limits that keep misbehaving clients from starving a scrape (docs/monitoring.md, "Limits").
// A client has kRequestTimeout to send a whole request head, counted from its connect or its previous
// answer, and as long again to take the answer; a stalled or trickling client is then closed.
constexpr auto kRequestTimeout = std::chrono::seconds(3);
// Connections open at once. A Prometheus server, a few dashboards and `nimbus dmon` need a handful;
// a new connection past this closes the one that has waited longest for its request.
constexpr size_t kMaxConnections = 64;
// The request line and headers of one request; longer is answered 414 or 431 and closed.
constexpr size_t kMaxRequestHead = 8192;
// After its last answer a connection reads and drops what the client still sends, for at most this
// long: closing with unread bytes would reset the connection and lose the answer.
constexpr auto kDrainTime = std::chrono::seconds(1);

struct Connection {
  int socket = -1;
  std::string received;  // bytes of requests not yet answered
  std::string to_send;   // the answer being sent
  size_t sent = 0;
  bool close_after_send = false;
  bool draining = false;  // answered for the last time: reading and dropping until the client closes
  bool finished = false;  // ready to close
  Clock::time_point deadline;
};

std::string answer(int status, const std::string& reason, const std::string& content_type, const std::string& body,
                   bool with_body, bool close, const std::string& extra_headers = {}) {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}{}\r\n{}", status, reason,
                     content_type, body.size(), extra_headers, close ? "Connection: close\r\n" : "",
                     with_body ? body : "");
}

void close_socket(int socket) {
  shutdown(socket, SHUT_RDWR);
  close(socket);
}

}  // namespace

// One thread polls the listening socket and every connection (non-blocking), so a client that
// sends half a request holds a slot, never a thread, and cannot delay anyone else's answer.
struct MetricsExporter::Server {
  const MetricRegistry& registry;
  std::string address;
  int port = 0;
  int listener = -1;
  int wake[2] = {-1, -1};  // the destructor writes to wake[1] to end the loop
  std::list<Connection> connections;
  std::atomic<uint64_t> requests{0};
  std::thread thread;

  explicit Server(const MetricRegistry& r) : registry(r) {}

  void bind_and_listen(int wanted_port);
  void serve();
  void accept_connections();
  void receive(Connection& connection);
  void drain(Connection& connection);
  void send_answer(Connection& connection);
  // Answers the request at the front of connection.received, if it is whole.
  void answer_request(Connection& connection);
};

void MetricsExporter::Server::bind_and_listen(int wanted_port) {
  const std::string hint = "pick another --metrics-port (0 takes any free one) or --metrics-address";
  const std::string where = wanted_port == 0 ? address : fmt::format("{}:{}", address, wanted_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), std::to_string(wanted_port).c_str(), &hints, &found) != 0) {
    throw Unavailable(fmt::format("metrics exporter: cannot listen on {}: not an address", where), hint);
  }
  for (const addrinfo* a = found; a != nullptr && listener < 0; a = a->ai_next) {
    listener = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (listener < 0) continue;
    // SO_REUSEADDR only: SO_REUSEPORT would let a second run bind the same port and take half the scrapes.
    const int yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(listener, a->ai_addr, a->ai_addrlen) != 0 || listen(listener, SOMAXCONN) != 0) {
      close(listener);
      listener = -1;
    }
  }
  freeaddrinfo(found);
  if (listener < 0) throw Unavailable(fmt::format("metrics exporter: cannot listen on {} (in use?)", where), hint);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(listener);
    throw Unavailable("metrics exporter: cannot make its wake-up pipe");
  }
}

void MetricsExporter::Server::accept_connections() {
  for (;;) {
    const int socket = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (socket < 0) return;  // none left (EAGAIN), or out of descriptors: the rest wait in the backlog
    if (connections.size() >= kMaxConnections) {
      // Make room by closing the connection that has waited longest for its request; answers being
      // sent are kept.
      auto oldest = connections.end();
      for (auto c = connections.begin(); c != connections.end(); ++c) {
        if (c->to_send.empty() && (oldest == connections.end() || c->deadline < oldest->deadline)) oldest = c;
      }
      if (oldest == connections.end()) {
        close_socket(socket);
        continue;
      }
      close_socket(oldest->socket);
      connections.erase(oldest);
    }
    // Without it Nagle's algorithm holds the body back until the client acknowledges the headers,
    // and delayed acknowledgements make every scrape take about 40 ms.
    const int yes = 1;
    setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    connections.push_back({.socket = socket, .deadline = Clock::now() + kRequestTimeout});
  }
}

void MetricsExporter::Server::answer_request(Connection& connection) {
  const size_t head_end = connection.received.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    if (connection.received.size() <= kMaxRequestHead) return;  // wait for the rest
    const bool line_too_long = connection.received.find("\r\n") == std::string::npos;
    connection.to_send =
        line_too_long
            ? answer(414, "URI Too Long", "text/plain", "request line too long\n", true, true)
            : answer(431, "Request Header Fields Too Large", "text/plain", "request headers too large\n", true, true);
    connection.close_after_send = true;
    return;
  }
  const std::string head = connection.received.substr(0, head_end);
  connection.received.erase(0, head_end + 4);
  const size_t line_end = head.find("\r\n");
  const std::string line = head.substr(0, line_end);
  const size_t first_space = line.find(' ');
  const size_t second_space = line.find(' ', first_space + 1);
  bool close = true;
  if (first_space == std::string::npos || second_space == std::string::npos ||
      line.find(' ', second_space + 1) != std::string::npos) {
    connection.to_send = answer(400, "Bad Request", "text/plain", "malformed request line\n", true, true);
  } else {
    const std::string method = line.substr(0, first_space);
    const std::string target = line.substr(first_space + 1, second_space - first_space - 1);
    const std::string version = line.substr(second_space + 1);
    const std::string headers = ascii_lower(head.substr(std::min(head.size(), line_end + 2)));
    // Keep the connection for the next request (Prometheus does) unless the client closes it or
    // sent a body, which is never read.
    close = version != "HTTP/1.1" || headers.find("connection: close") != std::string::npos ||
            headers.find("content-length:") != std::string::npos ||
            headers.find("transfer-encoding:") != std::string::npos;
    const std::string path = target.substr(0, target.find('?'));
    if (path != "/metrics") {
      connection.to_send = answer(404, "Not Found", "text/plain", "only /metrics is served\n", method != "HEAD", close);
    } else if (method != "GET" && method != "HEAD") {
      connection.to_send = answer(405, "Method Not Allowed", "text/plain", "GET or HEAD /metrics\n", true, close,
                                  "Allow: GET, HEAD\r\n");
    } else {
      connection.to_send = answer(200, "OK", kPrometheusContentType, prometheus_text(registry), method == "GET", close);
      requests.fetch_add(1, std::memory_order_relaxed);
    }
  }
  connection.close_after_send = connection.close_after_send || close;
  connection.sent = 0;
  connection.deadline = Clock::now() + kRequestTimeout;
}

void MetricsExporter::Server::receive(Connection& connection) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = recv(connection.socket, buffer, sizeof buffer, 0);
    if (got > 0) {
      connection.received.append(buffer, static_cast<size_t>(got));
      if (connection.received.size() > kMaxRequestHead + sizeof buffer) break;  // answer_request refuses it
      continue;
    }
    if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) connection.close_after_send = true;
    if (got == 0 || errno != EINTR) break;
  }
  if (connection.to_send.empty()) answer_request(connection);
  // A client that hung up with no answer owed is closed by the loop (close_after_send, nothing to send).
}

void MetricsExporter::Server::drain(Connection& connection) {
  char buffer[4096];
  ssize_t got = 0;
  while ((got = recv(connection.socket, buffer, sizeof buffer, 0)) > 0) {
  }
  if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) connection.finished = true;
}

void MetricsExporter::Server::send_answer(Connection& connection) {
  while (connection.sent < connection.to_send.size()) {
    const ssize_t put = send(connection.socket, connection.to_send.data() + connection.sent,
                             connection.to_send.size() - connection.sent, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) connection.close_after_send = true, connection.to_send.clear();
      return;
    }
    connection.sent += static_cast<size_t>(put);
  }
  connection.to_send.clear();
  connection.sent = 0;
  if (!connection.close_after_send) answer_request(connection);  // a pipelined request already read
}

void MetricsExporter::Server::serve() {
  std::vector<pollfd> polled;
  for (;;) {
    polled.assign({{.fd = wake[0], .events = POLLIN}, {.fd = listener, .events = POLLIN}});
    Clock::time_point next_deadline = Clock::now() + std::chrono::seconds(1);
    for (const Connection& c : connections) {
      polled.push_back({.fd = c.socket, .events = static_cast<short>(c.to_send.empty() ? POLLIN : POLLOUT)});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
    if (poll(polled.data(), polled.size(), static_cast<int>(std::max<int64_t>(0, wait.count()))) < 0 &&
        errno != EINTR) {
      return;
    }
    if (polled[0].revents != 0) return;  // the destructor asks to stop
    size_t index = 2;
    const Clock::time_point now = Clock::now();
    for (auto c = connections.begin(); c != connections.end(); ++index) {
      const short events = polled[index].revents;
      if (events & (POLLIN | POLLHUP | POLLERR)) c->draining ? drain(*c) : receive(*c);
      if (events & POLLOUT) send_answer(*c);
      if (c->to_send.empty() && c->close_after_send && !c->draining) {
        shutdown(c->socket, SHUT_WR);
        c->draining = true;
        c->deadline = std::min(c->deadline, now + kDrainTime);
      }
      if (c->finished || now >= c->deadline) {
        close_socket(c->socket);
        c = connections.erase(c);
      } else {
        ++c;
      }
    }
    if (polled[1].revents & POLLIN) accept_connections();
  }
}

MetricsExporter::MetricsExporter(const MetricRegistry& registry, const std::string& address, int port)
    : server_(std::make_unique<Server>(registry)) {
  server_->address = address;
  server_->bind_and_listen(port);
  server_->thread = std::thread([server = server_.get()] { server->serve(); });
}

MetricsExporter::~MetricsExporter() {
  const char stop = 1;
  (void)!write(server_->wake[1], &stop, 1);
  server_->thread.join();
  for (const Connection& c : server_->connections) close_socket(c.socket);
  close(server_->listener);
  close(server_->wake[0]);
  close(server_->wake[1]);
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
