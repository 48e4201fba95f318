// nimbus bench: measures the local device's achieved matmul and convolution rates, memory bandwidth
// and per-kernel overhead, as traced graphs run them, then trains a small probe CNN through
// `nimbus train`'s own code at two batch sizes with every kernel timed: each op's cost as training runs
// it, and the trainer's own time per step. It stores a profile (JSON) the planner uses for the local
// machine and to check its model against `nimbus train`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "nimbus/plan/device_model.h"

namespace nimbus::plan {

// Runs the measurements on the CPU with the runtime's compute threads (about ten seconds).
CalibrationProfile calibrate_cpu();

nlohmann::json to_json(const CalibrationProfile& profile);
CalibrationProfile profile_from_json(const nlohmann::json& json, const std::string& source);

// $NIMBUS_PROFILE, else $XDG_CACHE_HOME/nimbus/device-profile.json, else ~/.cache/nimbus/device-profile.json.
std::string default_profile_path();
// Makes the profile's folder and checks that a file can be written there, so that `nimbus bench`
// refuses a bad --profile before measuring; throws NotFound naming the path.
void prepare_profile_path(const std::string& path);
void save_profile(const CalibrationProfile& profile, const std::string& path);
// Throws NotFound with the remedy (`nimbus bench`) when there is none.
CalibrationProfile load_profile(const std::string& path);

}  // namespace nimbus::plan
