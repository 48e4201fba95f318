// nimbus dmon: device monitoring in nvidia-smi dmon's format, plus a training run's columns (docs/monitoring.md).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/base/error.h"
#include "nimbus/monitor/dmon.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/monitor/nvml_sampler.h"

namespace nimbus::cli {

namespace {

struct DmonArguments {
  std::string metrics = "puc", output_options, ids, url;
  int count = 0;
  double delay = 1;
};

std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  std::stringstream stream(text);
  std::string id;
  while (std::getline(stream, id, ',')) {
    int index = -1;
    const auto [stop, error] = std::from_chars(id.data(), id.data() + id.size(), index);
    if (error != std::errc() || stop != id.data() + id.size() || index < 0) {
      throw InvalidArgument(fmt::format("dmon -i {}: '{}' is not a device index", text, id),
                            "give indices from 0, comma-separated, e.g. -i 0,1");
    }
    ids.push_back(index);
  }
  return ids;
}

int run_dmon(const DmonArguments& arguments) {
  monitor::DmonOptions options{.metrics = arguments.metrics, .nimbus_columns = !arguments.url.empty()};
  for (char c : arguments.output_options) {
    if (c == 'D') {
      options.date = true;
    } else if (c == 'T') {
      options.time = true;
    } else {
      throw InvalidArgument(fmt::format("dmon -o {}: '{}' is not D or T", arguments.output_options, c));
    }
  }
  const monitor::DmonFormat format(options);
  const std::vector<int> ids = parse_ids(arguments.ids);
  std::unique_ptr<monitor::NvmlSampler> nvml;
  if (arguments.url.empty()) {
    nvml = std::make_unique<monitor::NvmlSampler>();
    if (!nvml->available()) {
      throw Unavailable("dmon: " + nvml->unavailable_reason(),
                        "attach to a training run's exporter instead: nimbus dmon --url http://HOST:PORT/metrics");
    }
  }
  std::cout << format.header() << std::flush;
  std::string previous_scrape;
  auto previous_time = std::chrono::steady_clock::now();
  for (int printed = 0; arguments.count == 0 || printed < arguments.count; ++printed) {
    if (printed > 0) std::this_thread::sleep_for(std::chrono::duration<double>(arguments.delay));
    std::vector<monitor::DeviceReading> devices;
    monitor::NimbusFigures figures;
    if (nvml) {
      devices = nvml->sample();
    } else {
      const std::string scrape = monitor::http_get(arguments.url);
      const auto now = std::chrono::steady_clock::now();
      const monitor::ScrapedRun run =
          monitor::read_scrape(scrape, previous_scrape, std::chrono::duration<double>(now - previous_time).count());
      previous_scrape = scrape;
      previous_time = now;
      devices = run.devices;
      figures = run.nimbus;
    }
    const std::time_t now = std::time(nullptr);
    bool any = false;
    for (const monitor::DeviceReading& device : devices) {
      if (!ids.empty() && std::find(ids.begin(), ids.end(), device.index) == ids.end()) continue;
      std::cout << format.row(&device, figures, now);
      any = true;
    }
    if (!any) std::cout << format.row(nullptr, figures, now);
    std::cout << std::flush;
  }
  return 0;
}

}  // namespace

Command add_dmon_command(CLI::App& app) {
  CLI::App* dmon = app.add_subcommand("dmon", "device monitoring in nvidia-smi dmon's format (docs/monitoring.md)");
  auto arguments = std::make_shared<DmonArguments>();
  dmon->add_option("-s", arguments->metrics, "metric groups: p power/temp, u utilization, c clocks, m memory, t PCIe")
      ->capture_default_str();
  dmon->add_option("-o", arguments->output_options, "D: add the date, T: add the time (DT for both)");
  dmon->add_option("-c", arguments->count, "print this many samples, then exit (0: until interrupted)")
      ->check(whole_number(0, 1'000'000'000));
  dmon->add_option("-d", arguments->delay, "seconds between samples")
      ->check(positive_real(86400))
      ->capture_default_str();
  dmon->add_option("-i", arguments->ids, "only these device indices (comma-separated)");
  dmon->add_option("--url", arguments->url,
                   "read a training run's exporter (http://HOST:PORT/metrics) instead of this machine's devices; "
                   "adds the run's columns");
  return [arguments] { return run_dmon(*arguments); };
}

}  // namespace nimbus::cli
