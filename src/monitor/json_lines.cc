#include "nimbus/monitor/json_lines.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "nimbus/base/error.h"

namespace nimbus::monitor {

JsonLines read_json_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFound(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  JsonLines log;
  int64_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    const bool ends_in_newline = end != std::string::npos;
    if (!ends_in_newline) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    ++number;
    begin = end + 1;
    if (line.empty()) continue;
    nlohmann::ordered_json object = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!object.is_discarded() && object.is_object()) {
      log.objects.push_back(std::move(object));
      continue;
    }
    log.malformed.push_back(number);
    if (!ends_in_newline) {
      log.torn_last_line =
          fmt::format("{}:{}: skipping the torn last line ({} bytes without a newline: the writer was killed mid-line)",
                      path, number, line.size());
    }
  }
  return log;
}

JsonLines read_run_log(const std::string& path) {
  JsonLines log = read_json_lines(path);
  const size_t damaged = log.malformed.size() - (log.torn_last_line ? 1 : 0);
  if (damaged > 0) {
    throw DataError(fmt::format("{}:{}: not a JSON object ({} such lines)", path, log.malformed.front(), damaged),
                    "the file is damaged: restore it, or delete the lines named");
  }
  return log;
}

}  // namespace nimbus::monitor
