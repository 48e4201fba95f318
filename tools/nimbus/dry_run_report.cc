#include "dry_run_report.h"

#include <fmt/format.h>

#include <optional>
#include <ostream>

#include "nimbus/plan/assumed_devices.h"
#include "nimbus/train/run_checks.h"

namespace nimbus::cli {

int report_dry_run(const nlohmann::json& config, train::RunOptions options, const std::string& config_path,
                   const std::string& assume_devices, std::ostream& out) {
  std::optional<train::AssumedDevices> assumed;
  if (!assume_devices.empty()) {
    assumed = plan::assumed_devices(plan::load_catalog(plan::default_catalog_files()), assume_devices);
    options.assume_devices = &*assumed;
  }
  const nlohmann::json report = train::dry_run(config, options);
  out << fmt::format("dry run of {}{}: nothing read but the data files' headers, nothing written\n", config_path,
                     assumed ? " on " + assumed->to_string() : std::string());
  for (const auto& line : report.at("checked")) out << "  " << line.get<std::string>() << "\n";
  out << "ok: a run would start\n";
  return 0;
}

}  // namespace nimbus::cli
