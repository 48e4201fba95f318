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
// Every key is checked: an unknown key is an InvalidArgument naming the file,
// the line and the closest known key; a value of the wrong type names the key,
// the line and the expected type. Overrides ("fit.epochs=3", as `--set`)
// apply to keys the schema knows, whether or not the file has them; the value
// is parsed as YAML and checked like the file's.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/monitor/run_monitor.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {

// Reads, applies the overrides, checks, and returns the config as JSON with every default filled in.
nlohmann::json load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text (`source` names it in errors).
nlohmann::json parse_config(const std::string& yaml_text, const std::string& source,
                            const std::vector<std::string>& overrides = {});

struct RunOptions {
  // The run directory (run_directory.h); empty: default_run_dir(), runs/<date-time>.
  std::string run_dir;
  // Continue from the run directory's newest intact checkpoint (`nimbus train --resume`).
  bool resume = false;
  // The run's monitor::RunMonitor settings (metrics exporter); null: defaults, no exporter. The
  // monitor always records in the run directory (sample lines, step spans, trace.json).
  const monitor::RunMonitorOptions* monitoring = nullptr;
  // Multi-worker, on workers other than rank 0: rank 0's run directory. Rank 0 alone writes checkpoints
  // (every worker waits at a barrier after each save), and every worker resumes from them: each takes
  // its share of the same global batches, so rank 0's data position is every worker's.
  std::string chief_run_dir{};
};

// Trains as the config says, printing Keras's progress to `out`, writing the run directory
// (config.json, metrics.jsonl, checkpoints/, tensorboard/, summary.json). SIGTERM or SIGINT
// checkpoints after the current step and returns early (preemption.h). Returns the summary
// (RunDirectory::finish): samples_per_sec (after the first 20 steps), samples_total, steps,
// wall_seconds, peak_memory_bytes, peak_rss_bytes, final (the last epoch's validation metrics,
// e.g. val_accuracy), epochs (one object of metrics per epoch, by Keras name, with
// elapsed_seconds), interrupted, micro_batch, gradient_accumulation and memory (the pre-run
// check), input_wait_seconds_total and step_span_seconds (the step profiler's totals per span).
nlohmann::json run_config(const nlohmann::json& config, std::ostream& out, const RunOptions& options = {});

// The pieces run_config is made of, for `nimbus evaluate` and `nimbus predict`.
// runtime.threads, seed, graph, jit, ... as the process's runtime options; checks runtime.device; and
// runtime.memory as configure_memory_from_config.
void configure_runtime_from_config(const nlohmann::json& config);
// Applies runtime.memory (mode, fraction, limit; NIMBUS_MEMORY_MODE / NIMBUS_MEMORY_LIMIT override) to the CPU.
void configure_memory_from_config(const nlohmann::json& config);
// The model section's model, built (an Input first).
nn::Model model_from_train_config(const nlohmann::json& config);
Trainer compile_from_config(nn::Model model, const nlohmann::json& config);
// (images scaled and shaped for the model's input, labels) of a data.train / data.validation
// section ({images, labels, scale}: IDX files; scale defaults to 1/255).
std::pair<Tensor, Tensor> load_idx_split(const nlohmann::json& split, const nn::Model& model,
                                         const std::string& section);
Tensor load_idx_images(const nlohmann::json& split, const nn::Model& model);
// compile.loss's value: a name, or {name, from_logits, label_smoothing}.
Loss loss_from_config(const nlohmann::json& spec);

}  // namespace nimbus::train
