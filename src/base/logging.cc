#include "nimbus/base/logging.h"

#include <iostream>
#include <mutex>

namespace nimbus {
namespace {

struct LogState {
  std::mutex mutex;
  LogSink sink;
};

LogState& state() {
  static LogState s;
  return s;
}

void emit(LogLevel level, std::string_view message) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.sink) {
    s.sink(level, message);
    return;
  }
  std::cerr << (level == LogLevel::kWarning ? "nimbus: warning: " : "nimbus: ") << message << "\n";
}

}  // namespace

void log_info(std::string_view message) { emit(LogLevel::kInfo, message); }
void log_warning(std::string_view message) { emit(LogLevel::kWarning, message); }

LogSink set_log_sink(LogSink sink) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  LogSink previous = std::move(s.sink);
  s.sink = std::move(sink);
  return previous;
}

}  // namespace nimbus
