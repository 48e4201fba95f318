// Config-driven training (`nimbus train CONFIG.yaml`): a YAML file names the
// model with Keras's layer names and arguments, the compile settings, the
// data (IDX files for now), and the fit and runtime settings.
//
//   nlohmann::json config = train::load_config("examples/fashion_mnist_cnn.yaml", {"fit.epochs=1"});
//   nlohmann::json summary = train::run_config(config, std::cout);   // summary["final"]["val_accuracy"]
//
//   model:
//     name: fashion_mnist_mlp
//     input_shape: [28, 28, 1]
//     layers:
//       - Flatten: {}
//       - Dense: {units: 512, activation: relu}
//       - Dense: {units: 10}
//   compile:
//     optimizer: {name: adam, learning_rate: 0.001}   # or just: adam
//     loss: {name: sparse_categorical_crossentropy, from_logits: true}
//     metrics: [accuracy]
//   data:
//     train: {images: .../train-images-idx3-ubyte.gz, labels: .../train-labels-idx1-ubyte.gz}
//     validation: {images: ..., labels: ...}
//   fit: {epochs: 5, batch_size: 128}      # batch_size or gradient_accumulation may be auto (memory_check.h)
//   runtime: {threads: 2, graph: true, jit: true, seed: 1,
//             memory: {mode: growth, fraction: 0.9, limit: 12GiB, trim_between_epochs: false}}
//
// The model section may also be Keras's model.to_json() form ({class_name, config}).
// Three files make it: the schema and its validation (config_schema.h: load_config,
// parse_config), the objects a config describes (from_config.h), and the run
// (this file's run_config); this header includes the other two.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "nimbus/monitor/run_monitor.h"
#include "nimbus/train/assumed_devices.h"
#include "nimbus/train/config_schema.h"
#include "nimbus/train/from_config.h"
#include "nimbus/train/run_claim.h"

namespace nimbus::train {

struct RunOptions {
  // The run directory (run_directory.h); empty: default_run_dir(), runs/<date-time>.
  std::string run_dir;
  // How the run takes its directory (run_claim.h): a new run (the folder must hold none), --overwrite
  // (an old run there is moved aside) or --resume (from the newest intact checkpoint; from step 0
  // when the run has no checkpoint file yet and the config is the run's own).
  RunStart start = RunStart::kNew;
  // The run's monitor::RunMonitor settings (metrics exporter); null: defaults, no exporter. The
  // monitor always records in the run directory (sample lines, step spans, trace.json).
  const monitor::RunMonitorOptions* monitoring = nullptr;
  // Multi-worker, on workers other than rank 0: rank 0's run directory. Rank 0 alone writes checkpoints
  // (every worker waits at a barrier after each save), and every worker resumes from them: each takes
  // its share of the same global batches, so rank 0's data position is every worker's.
  std::string chief_run_dir{};
  // A dry run's hardware instead of this machine's (nimbus train --dry-run --assume-devices); null: this machine.
  const AssumedDevices* assume_devices = nullptr;
};

// Trains as the config says, printing the training device and why it was chosen first
// ("device: cpu:0 (auto: this build has no CUDA backend)") and Keras's progress to `out`, writing the run directory
// (config.json, metrics.jsonl, checkpoints/, tensorboard/, summary.json). Everything that can refuse
// the start (the memory check, --resume's checkpoint, a taken metrics port) is checked before the
// directory is claimed (RunClaim) or any file in it written. SIGTERM or SIGINT
// checkpoints after the current step and returns early (preemption.h). Returns the summary
// (RunDirectory::finish): samples_per_sec (after the first 20 steps), samples_total, steps,
// wall_seconds, run_dir (the directory, e.g. the default one chosen), device, device_count, device_names,
// device_reason (why that device), peak_memory_bytes (the training device's), peak_host_memory_bytes (the
// data set and pipeline buffers), host_peak_rss_bytes, final (the last epoch's validation
// metrics, e.g. val_accuracy), epochs (one object of metrics per epoch, by Keras name, with
// elapsed_seconds), interrupted, micro_batch, gradient_accumulation and memory (the pre-run
// check), input_wait_seconds_total and step_span_seconds (the step profiler's totals per span).
nlohmann::json run_config(const nlohmann::json& config, std::ostream& out, const RunOptions& options = {});

}  // namespace nimbus::train
