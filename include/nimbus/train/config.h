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
//   fit: {epochs: 5, batch_size: 128}
//   runtime: {threads: 2, graph: true, jit: true, seed: 1}
//
// The model section may also be Keras's model.to_json() form ({class_name, config}).
// Every key is checked: an unknown key is an InvalidArgument naming the file,
// the line and the closest known key; a value of the wrong type names the key,
// the line and the expected type. Overrides ("fit.epochs=3", as `--set`)
// apply to keys the schema knows, whether or not the file has them; the value
// is parsed as YAML and checked like the file's.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/monitor/run_monitor.h"

namespace nimbus::train {

// Reads, applies the overrides, checks, and returns the config as JSON with every default filled in.
nlohmann::json load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text (`source` names it in errors).
nlohmann::json parse_config(const std::string& yaml_text, const std::string& source,
                            const std::vector<std::string>& overrides = {});

// Trains as the config says, printing Keras's progress to `out`. Returns the summary:
// samples_per_sec (after the first 20 steps), samples_total, steps, wall_seconds,
// peak_rss_bytes, final (the last epoch's validation metrics, e.g. val_accuracy) and
// epochs (one object of metrics per epoch, by Keras name), input_wait_seconds_total and
// step_span_seconds (the step profiler's totals per span). With `monitoring`, a
// monitor::RunMonitor watches the run (metrics exporter, samplers, metrics.jsonl, trace.json).
nlohmann::json run_config(const nlohmann::json& config, std::ostream& out,
                          const monitor::RunMonitorOptions* monitoring = nullptr);

}  // namespace nimbus::train
