#include "nimbus/monitor/host_sampler.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace nimbus::monitor {

namespace {

// utime + stime of a /proc/.../stat file, in seconds; 0 when the file is gone (a thread that ended).
double stat_cpu_seconds(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!std::getline(in, text)) return 0;
  // The command name (field 2) is in parentheses and may hold spaces: fields count from the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  // After ')': state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i < 14; ++i) fields >> field;
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  static const double ticks = double(sysconf(_SC_CLK_TCK));
  return (utime + stime) / ticks;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "VmRSS:  1234 kB" style lines of /proc files, in bytes.
uint64_t kib_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size())) * 1024;
  }
  return 0;
}

}  // namespace

HostSampler::HostSampler() : last_time_(std::chrono::steady_clock::now()) {
  last_process_cpu_ = stat_cpu_seconds("/proc/self/stat");
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    last_thread_cpu_[std::stoi(entry.path().filename().string())] = stat_cpu_seconds(entry.path().string() + "/stat");
  }
}

HostReading HostSampler::sample() {
  HostReading reading;
  const auto now = std::chrono::steady_clock::now();
  const double wall = std::max(1e-9, std::chrono::duration<double>(now - last_time_).count());
  last_time_ = now;
  reading.process_cpu_seconds = stat_cpu_seconds("/proc/self/stat");
  reading.process_cpu_ratio = (reading.process_cpu_seconds - last_process_cpu_) / wall;
  last_process_cpu_ = reading.process_cpu_seconds;

  std::map<int, double> thread_cpu;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    const std::string dir = entry.path().string();
    const int tid = std::stoi(entry.path().filename().string());
    const double seconds = stat_cpu_seconds(dir + "/stat");
    const std::string name = read_line(dir + "/comm");
    thread_cpu[tid] = seconds;
    // A thread born since the last sample counts from its start: all its CPU time falls in this interval.
    const auto previous = last_thread_cpu_.find(tid);
    const double used = seconds - (previous == last_thread_cpu_.end() ? 0 : previous->second);
    reading.thread_cpu_ratio[name] += used / wall;
    ++reading.thread_count[name];
  }
  last_thread_cpu_ = std::move(thread_cpu);

  reading.resident_bytes = kib_field("/proc/self/status", "VmRSS:");
  reading.system_memory_total_bytes = kib_field("/proc/meminfo", "MemTotal:");
  reading.system_memory_available_bytes = kib_field("/proc/meminfo", "MemAvailable:");
  reading.cores = static_cast<int>(std::thread::hardware_concurrency());
  return reading;
}

}  // namespace nimbus::monitor
