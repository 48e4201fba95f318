// Host sampler: this process's CPU use (whole and per thread, by thread
// name), its resident memory, and the machine's memory, read from /proc.
//
//   monitor::HostSampler sampler;
//   monitor::HostReading r = sampler.sample();   // CPU figures cover the time since the last sample
//   r.process_cpu_ratio;                         // 1.0 = one core busy
//   r.thread_cpu_ratio["nimbus-data"];           // the input pipeline's workers together
//
// Threads are grouped by name (/proc/self/task/*/comm), so name worker
// threads (pthread_setname_np) to see them apart; the first sample's ratios
// cover the time since the sampler was made.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace nimbus::monitor {

struct HostReading {
  double process_cpu_seconds = 0;  // user + system, since the process started
  double process_cpu_ratio = 0;    // CPU seconds per wall second over the interval
  // Per thread name: CPU seconds per wall second over the interval, and the thread count.
  std::map<std::string, double> thread_cpu_ratio;
  std::map<std::string, int> thread_count;
  uint64_t resident_bytes = 0;
  uint64_t system_memory_total_bytes = 0, system_memory_available_bytes = 0;
  int cores = 0;
};

class HostSampler {
 public:
  HostSampler();
  HostReading sample();

 private:
  std::chrono::steady_clock::time_point last_time_;
  double last_process_cpu_ = 0;
  std::map<int, double> last_thread_cpu_;  // by thread id
};

}  // namespace nimbus::monitor
