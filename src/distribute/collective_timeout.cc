#include "collective_timeout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nimbus::distribute {

std::string format_timeout(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  if (ms % 60000 == 0) return fmt::format("{}min", ms / 60000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

CollectiveTimeout collective_timeout(const std::string& collective, int rank, int size, const std::vector<int>& missing,
                                     std::chrono::milliseconds timeout, const std::string& context,
                                     const std::vector<int>& stuck) {
  std::string message = fmt::format("{} timed out after {} (runtime.strategy.collective_timeout) on rank {} of {}",
                                    collective, format_timeout(timeout), rank, size);
  if (!context.empty()) message += " at " + context;
  if (missing.size() == 1) {
    message += fmt::format(": rank {} did not arrive", missing[0]);
  } else if (!missing.empty()) {
    message += fmt::format(": ranks {} did not arrive", fmt::join(missing, ", "));
  } else if (stuck.size() == 1) {
    message += fmt::format(": rank {} arrived but stopped before the collective completed", stuck[0]);
  } else if (!stuck.empty()) {
    message += fmt::format(": every rank arrived, and one of ranks {} stopped before the collective completed",
                           fmt::join(stuck, ", "));
  } else {
    message += ": some rank did not arrive";
  }
  return CollectiveTimeout(message,
                           "a worker is stopped, dead or slower than the timeout; if its steps legitimately take "
                           "longer, raise runtime.strategy.collective_timeout");
}

}  // namespace nimbus::distribute
