// Reading a run's own JSON-lines logs (metrics.jsonl): the one reader `nimbus doctor`, `nimbus report`
// and `nimbus train --resume` share. A process killed mid-write (kill -9, a reclaimed spot instance)
// leaves the file's last line torn: cut short, without its newline. That line is what a kill leaves,
// not damage, so readers skip it; a malformed line anywhere else is damage.
//
//   monitor::JsonLines log = monitor::read_json_lines("runs/a/metrics.jsonl");
//   for (const auto& line : log.objects) ...;   if (log.torn_last_line) warn(*log.torn_last_line);
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nimbus::monitor {

struct JsonLines {
  std::vector<nlohmann::ordered_json> objects;  // every line that is a JSON object, in order
  // The numbers (from 1) of the other non-empty lines, the torn last line included.
  std::vector<int64_t> malformed;
  // "PATH:N: skipping the torn last line (...)" when the last line is cut short.
  std::optional<std::string> torn_last_line;
};

// Reads `path` (NotFound naming it when there is no such file). Never throws for a malformed line.
JsonLines read_json_lines(const std::string& path);

// read_json_lines for readers of a finished or killed run: a torn last line is skipped (its warning
// in `torn_last_line`); any other malformed line is a DataError naming PATH:LINE.
JsonLines read_run_log(const std::string& path);

}  // namespace nimbus::monitor
