// Warnings and notes for the user, on stderr by default.
//
//   log_warning("function 'train_step' has traced 6 signatures ...");
//   set_log_sink([](LogLevel level, std::string_view message) { ... });  // tests capture messages
#pragma once

#include <functional>
#include <string_view>

namespace nimbus {

enum class LogLevel { kInfo, kWarning };

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

void log_info(std::string_view message);
void log_warning(std::string_view message);
// Replaces where messages go; returns the previous sink. A null sink restores stderr.
LogSink set_log_sink(LogSink sink);

}  // namespace nimbus
