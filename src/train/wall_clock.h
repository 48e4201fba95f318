// The wall clock as the run's files record it: seconds since the Unix epoch (metrics.jsonl's "time",
// TensorBoard's event wall_time).
#pragma once

#include <chrono>

namespace nimbus::train {

inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace nimbus::train
