#include "nimbus/monitor/dmon.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "nimbus/base/error.h"
#include "nimbus/monitor/prometheus_text.h"

namespace nimbus::monitor {

namespace {

using Column = DmonFormat::Column;
constexpr double kMiB = 1 << 20;

double device_figure(const DeviceReading* d, double DeviceReading::*field, double scale) {
  return d == nullptr ? DeviceReading::kUnread : d->*field * scale;
}

const std::map<char, std::vector<Column>>& column_groups() {
  static const std::map<char, std::vector<Column>> groups = {
      {'p',
       {{"pwr", "W", [](auto d, auto&) { return device_figure(d, &DeviceReading::power_watts, 1); }},
        {"gtemp", "C", [](auto d, auto&) { return device_figure(d, &DeviceReading::gpu_temp_celsius, 1); }},
        {"mtemp", "C", [](auto d, auto&) { return device_figure(d, &DeviceReading::memory_temp_celsius, 1); }}}},
      {'u',
       {{"sm", "%", [](auto d, auto&) { return device_figure(d, &DeviceReading::sm_util_percent, 1); }},
        {"mem", "%", [](auto d, auto&) { return device_figure(d, &DeviceReading::mem_util_percent, 1); }},
        {"enc", "%", [](auto d, auto&) { return device_figure(d, &DeviceReading::enc_util_percent, 1); }},
        {"dec", "%", [](auto d, auto&) { return device_figure(d, &DeviceReading::dec_util_percent, 1); }}}},
      {'c',
       {{"mclk", "MHz", [](auto d, auto&) { return device_figure(d, &DeviceReading::memory_clock_mhz, 1); }},
        {"pclk", "MHz", [](auto d, auto&) { return device_figure(d, &DeviceReading::sm_clock_mhz, 1); }}}},
      {'m',
       {{"fb", "MB", [](auto d, auto&) { return device_figure(d, &DeviceReading::memory_used_bytes, 1 / kMiB); }},
        {"bar1", "MB", [](auto, auto&) { return DeviceReading::kUnread; }}}},
      {'t',
       {{"rxpci", "MB/s",
         [](auto d, auto&) { return device_figure(d, &DeviceReading::pcie_rx_bytes_per_second, 1 / kMiB); }},
        {"txpci", "MB/s",
         [](auto d, auto&) { return device_figure(d, &DeviceReading::pcie_tx_bytes_per_second, 1 / kMiB); }}}},
  };
  return groups;
}

const std::vector<Column>& nimbus_columns() {
  static const std::vector<Column> columns = {
      {"sps", "1/s", [](auto, const NimbusFigures& n) { return n.samples_per_second; }},
      {"iwait", "%", [](auto, const NimbusFigures& n) { return n.input_wait_percent; }},
      {"step", "ms", [](auto, const NimbusFigures& n) { return n.step_milliseconds; }},
      {"cpu", "%", [](auto, const NimbusFigures& n) { return n.cpu_percent; }},
      {"rss", "MB", [](auto, const NimbusFigures& n) { return n.resident_megabytes; }},
  };
  return columns;
}

// nvidia-smi prints whole numbers, '-' for what it cannot read.
std::string cell(double value) {
  if (std::isnan(value)) return fmt::format(" {:>5}", "-");
  return fmt::format(" {:>5.0f}", value);
}

}  // namespace

DmonFormat::DmonFormat(DmonOptions options) : options_(std::move(options)) {
  for (char letter : options_.metrics) {
    const auto group = column_groups().find(letter);
    if (group == column_groups().end()) {
      throw InvalidArgument(
          fmt::format("dmon -s {}: '{}' is not a metric group Nimbus reads", options_.metrics, letter),
          "use p (power, temperature), u (utilization), c (clocks), m (memory), t (PCIe)");
    }
    columns_.insert(columns_.end(), group->second.begin(), group->second.end());
  }
  if (options_.nimbus_columns) columns_.insert(columns_.end(), nimbus_columns().begin(), nimbus_columns().end());
}

std::string DmonFormat::header() const {
  // Date and time fields are 12 wide; the first field of a line carries the '#'.
  std::string names, units;
  if (options_.date) {
    names += fmt::format("{:<12}", "#Date");
    units += fmt::format("{:<12}", "#YYYYMMDD");
  }
  if (options_.time) {
    names += fmt::format("{:<12}", names.empty() ? "#Time" : "Time");
    units += fmt::format("{:<12}", units.empty() ? "#HH:MM:SS" : "HH:MM:SS");
  }
  if (names.empty()) {
    names = "# gpu";
    units = "# Idx";
  } else {
    names += "gpu";
    units += "Idx";
  }
  for (const Column& column : columns_) {
    names += fmt::format(" {:>5}", column.name);
    units += fmt::format(" {:>5}", column.unit);
  }
  return names + "\n" + units + "\n";
}

std::string DmonFormat::row(const DeviceReading* device, const NimbusFigures& nimbus, std::time_t now) const {
  std::string line;
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  if (options_.date) {
    std::strftime(text, sizeof text, "%Y%m%d", &local);
    line += fmt::format("{:<12}", std::string(" ") + text);
  }
  if (options_.time) {
    std::strftime(text, sizeof text, "%H:%M:%S", &local);
    line += fmt::format("{:<12}", (line.empty() ? std::string(" ") : std::string()) + text);
  }
  const std::string index = device == nullptr ? "-" : std::to_string(device->index);
  line += line.empty() ? fmt::format("{:>5}", index) : fmt::format("{:>3}", index);
  for (const Column& column : columns_) line += cell(column.value(device, nimbus));
  return line + "\n";
}

namespace {

// Sum of a metric's series matching `name` (all label sets); NaN when there is none.
double total(const std::vector<ParsedSample>& samples, const std::string& name) {
  double sum = 0;
  bool found = false;
  for (const ParsedSample& s : samples) {
    if (s.name == name) {
      sum += s.value;
      found = true;
    }
  }
  return found ? sum : DeviceReading::kUnread;
}

}  // namespace

ScrapedRun read_scrape(const std::string& current, const std::string& previous, double seconds) {
  const std::vector<ParsedSample> now = parse_prometheus_text(current);
  ScrapedRun run;
  // DCGM series -> device readings, by the gpu label.
  const std::map<std::string, std::pair<double DeviceReading::*, double>> fields = {
      {"DCGM_FI_DEV_GPU_UTIL", {&DeviceReading::sm_util_percent, 1}},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", {&DeviceReading::mem_util_percent, 1}},
      {"DCGM_FI_DEV_ENC_UTIL", {&DeviceReading::enc_util_percent, 1}},
      {"DCGM_FI_DEV_DEC_UTIL", {&DeviceReading::dec_util_percent, 1}},
      {"DCGM_FI_DEV_FB_USED", {&DeviceReading::memory_used_bytes, kMiB}},
      {"DCGM_FI_DEV_POWER_USAGE", {&DeviceReading::power_watts, 1}},
      {"DCGM_FI_DEV_GPU_TEMP", {&DeviceReading::gpu_temp_celsius, 1}},
      {"DCGM_FI_DEV_MEMORY_TEMP", {&DeviceReading::memory_temp_celsius, 1}},
      {"DCGM_FI_DEV_SM_CLOCK", {&DeviceReading::sm_clock_mhz, 1}},
      {"DCGM_FI_DEV_MEM_CLOCK", {&DeviceReading::memory_clock_mhz, 1}},
      {"DCGM_FI_PROF_PCIE_RX_BYTES", {&DeviceReading::pcie_rx_bytes_per_second, 1}},
      {"DCGM_FI_PROF_PCIE_TX_BYTES", {&DeviceReading::pcie_tx_bytes_per_second, 1}},
  };
  std::map<int, DeviceReading> devices;
  for (const ParsedSample& s : now) {
    const auto field = fields.find(s.name);
    if (field == fields.end() || s.label("gpu").empty()) continue;
    DeviceReading& d = devices[std::stoi(s.label("gpu"))];
    d.index = std::stoi(s.label("gpu"));
    d.name = s.label("modelName");
    d.uuid = s.label("UUID");
    d.pci_bus_id = s.label("pci_bus_id");
    d.*(field->second.first) = s.value * field->second.second;
  }
  for (auto& [index, reading] : devices) run.devices.push_back(reading);

  run.nimbus.cpu_percent = total(now, "nimbus_host_process_cpu_ratio") * 100;
  run.nimbus.resident_megabytes = total(now, "nimbus_host_resident_memory_bytes") / kMiB;
  if (previous.empty() || seconds <= 0) return run;
  const std::vector<ParsedSample> before = parse_prometheus_text(previous);
  auto delta = [&](const std::string& name) { return total(now, name) - total(before, name); };
  const double step_seconds = delta("nimbus_step_seconds_sum");
  const double steps = delta("nimbus_step_seconds_count");
  run.nimbus.samples_per_second = delta("nimbus_samples_total") / seconds;
  if (steps > 0) {
    run.nimbus.step_milliseconds = step_seconds / steps * 1e3;
    run.nimbus.input_wait_percent = delta("nimbus_input_wait_seconds_total") / step_seconds * 100;
  }
  return run;
}

}  // namespace nimbus::monitor
