// `nimbus dmon`: device monitoring lines in `nvidia-smi dmon`'s format (two
// '#' header lines, then one line per device per interval, each column right-
// aligned in 5 characters, '-' for a figure the device does not report), plus
// Nimbus's own columns when attached to a training run's exporter.
//
//   monitor::DmonFormat format(monitor::DmonOptions{.metrics = "puc", .date = true, .time = true});
//   std::cout << format.header();                  // "#Date       Time        gpu   pwr gtemp ..."
//   std::cout << format.row(reading, nimbus, now);
//
// Column groups (-s letters, in the order given; default "puc"):
//   p: pwr W, gtemp C, mtemp C    u: sm %, mem %, enc %, dec %    c: mclk MHz, pclk MHz
//   m: fb MB, bar1 MB             t: rxpci MB/s, txpci MB/s
// nvidia-smi's v (violations) and e (ECC) groups are not read by Nimbus and are refused.
// With a run attached: sps 1/s (samples per second), iwait % (share of step time waiting
// for input), step ms (mean step time), cpu % (the process's CPU, 100 = one core), rss MB.
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "nimbus/monitor/nvml_sampler.h"

namespace nimbus::monitor {

struct DmonOptions {
  std::string metrics = "puc";      // -s
  bool date = false, time = false;  // -o D, -o T
  bool nimbus_columns = false;      // attached to a run
};

// What a run's exporter says over one interval; NaN where unknown.
struct NimbusFigures {
  double samples_per_second = DeviceReading::kUnread;
  double input_wait_percent = DeviceReading::kUnread;
  double step_milliseconds = DeviceReading::kUnread;
  double cpu_percent = DeviceReading::kUnread;
  double resident_megabytes = DeviceReading::kUnread;
};

class DmonFormat {
 public:
  // Throws InvalidArgument naming a letter of `metrics` that is not p, u, c, m or t.
  explicit DmonFormat(DmonOptions options);
  // The two header lines, each ending in '\n'.
  std::string header() const;
  // One device's line ('\n'-terminated); `device` null prints '-' in the gpu and device columns
  // (a run attached without device metrics).
  std::string row(const DeviceReading* device, const NimbusFigures& nimbus, std::time_t now) const;

  struct Column {
    std::string name, unit;
    // The figure this column prints, from a device reading or the run's figures.
    double (*value)(const DeviceReading*, const NimbusFigures&);
  };
  const std::vector<Column>& columns() const { return columns_; }

 private:
  DmonOptions options_;
  std::vector<Column> columns_;
};

// The device readings and Nimbus figures in an exporter's text: device readings from its
// DCGM_FI_* series (by their gpu label), figures from the difference between two scrapes
// `seconds` apart. `previous` empty: only the device readings.
struct ScrapedRun {
  std::vector<DeviceReading> devices;
  NimbusFigures nimbus;
};
ScrapedRun read_scrape(const std::string& current, const std::string& previous, double seconds);

}  // namespace nimbus::monitor
