// Everything a training run checks before it writes anything, in the one function that `nimbus train`
// and `nimbus train --dry-run` both call: the runtime (threads; the device, this machine's or the
// hardware --assume-devices names, assumed_devices.h), the model, the training and validation data,
// the optimizer, loss and strategy, the memory of the traced step at the micro-batch the run will use
// (memory_check.h), --resume's checkpoint and a taken --metrics-port. The config itself was checked
// when it was loaded (config_schema.h: load_config validates every key and value).
//
//   CheckedRun checked = check_run(config, options, DataReading::kContents, out);   // run_config trains it
//   nlohmann::json report = dry_run(config, options);    // the same checks, the data files' headers only
//
// A dry run reads of the data files only what tells their existence, shapes and sample counts (IDX
// headers; a pipeline is built, its files listed, and not iterated), and writes nothing.
#pragma once

#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "nimbus/device/device_choice.h"
#include "nimbus/train/config.h"
#include "nimbus/train/memory_check.h"

namespace nimbus::train {

enum class DataReading {
  kContents,  // load the data sets (a run)
  kHeaders,   // their headers only: the data tensors are symbolic, shapes without memory (a dry run)
};

// What the checks made, for the run to go on with.
struct CheckedRun {
  DeviceChoice device;  // where the model trains, and why there
  std::unique_ptr<Trainer> trainer;
  TrainingData train_data;
  std::optional<std::pair<Tensor, Tensor>> validation_data;  // loaded with kContents only
  MemoryDecision memory;
  std::optional<TrainingPosition> resumed;  // with RunStart::kResume
  // What was checked, a line each in order ("data.train: 60000 samples, x (60000, 28, 28, 1) f32").
  std::vector<std::string> checked;
};

// Runs every check in order and throws the first failure (an Error naming the key, flag or file and
// the remedy). Prints what a run prints before its first step (the model's summary, the memory
// check's choice) to `out`.
CheckedRun check_run(const nlohmann::json& config, const RunOptions& options, DataReading data, std::ostream& out);

// nimbus train --dry-run: check_run with DataReading::kHeaders. Returns the report: {checked: [lines],
// device, micro_batch, gradient_accumulation, memory (MemoryDecision::to_json)}.
nlohmann::json dry_run(const nlohmann::json& config, const RunOptions& options);

}  // namespace nimbus::train
