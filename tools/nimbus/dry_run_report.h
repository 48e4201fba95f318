// nimbus train --dry-run [--assume-devices [NODESx]COUNTxGPU]: the run's checks (train/run_checks.h), on this
// machine or on the catalog GPUs named, and a short report of what was checked.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "nimbus/train/config.h"

namespace nimbus::cli {

// Runs train::dry_run with `options` (the run's own) and prints its report to `out`; returns 0, or
// throws the first failed check. `assume_devices`: the flag's text, empty for this machine.
int report_dry_run(const nlohmann::json& config, train::RunOptions options, const std::string& config_path,
                   const std::string& assume_devices, std::ostream& out);

}  // namespace nimbus::cli
