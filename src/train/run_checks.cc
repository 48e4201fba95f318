#include "nimbus/train/run_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <span>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/data/idx.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/train/checkpoint.h"
#include "nimbus/train/data_config.h"
#include "nimbus/train/run_directory.h"
#include "rows.h"
#include "token_data_config.h"

namespace nimbus::train {

using Json = nlohmann::json;

namespace {

// Where --resume continues: the newest intact checkpoint of the run (rank 0's, for every worker).
// A run with no checkpoint file yet (killed before its first) starts again from step 0, provided
// the config is the run's own: a restarted pod's, not another run's.
TrainingPosition resume_position(Trainer& trainer, const Json& config, const RunOptions& options, std::ostream& out) {
  const RunDirectory run(options.chief_run_dir.empty() ? options.run_dir : options.chief_run_dir);
  if (!std::filesystem::exists(run.config_path())) {
    throw NotFound(fmt::format("{}: holds no run to resume (no config.json)", run.path()),
                   fmt::format("start a run there: nimbus train CONFIG.yaml --run-dir {}", run.path()));
  }
  if (run.has_checkpoint_files()) {
    const CheckpointInfo checkpoint = restore_latest_checkpoint(trainer, run.checkpoints(), std::cerr);
    const TrainingPosition& at = checkpoint.position;
    out << fmt::format("Resuming from {}: {} epochs and {} steps of epoch {} done (global step {})\n", checkpoint.path,
                       at.epochs_done, at.steps_in_epoch, at.epochs_done + 1, at.global_step)
        << std::flush;
    return at;
  }
  const Json recorded = load_config(run.config_path());
  const Json differences = Json::diff(recorded, config);
  if (!differences.empty()) {
    const Json::json_pointer at(differences[0].at("path").get<std::string>());
    auto value = [&](const Json& json) { return json.contains(at) ? json.at(at).dump() : std::string("absent"); };
    std::string key = at.to_string().substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    throw InvalidArgument(
        fmt::format("{}: has no checkpoint yet and was started with another config ({}: {} there, {} here)", run.path(),
                    key, value(recorded), value(config)),
        fmt::format("resume with the run's own config (nimbus train --resume {0}), or start this config there "
                    "afresh with --overwrite (the old run is moved aside)",
                    run.path()));
  }
  out << fmt::format("Resuming {} from step 0: no checkpoint yet, the same config\n", run.path()) << std::flush;
  return {};
}

// A taken --metrics-port is refused before the run directory is claimed: the exporter binds it
// once here and lets it go (a port taken in the moment between is refused when the monitor starts).
void check_metrics_port_free(const monitor::RunMonitorOptions& monitoring) {
  if (!monitoring.metrics_port || *monitoring.metrics_port == 0) return;
  const monitor::MetricRegistry registry;
  const monitor::MetricsExporter probe(registry, monitoring.metrics_address, *monitoring.metrics_port);
}

Tensor symbolic(std::vector<int64_t> shape, DType dtype) {
  return Tensor::symbolic(Shape(std::span<const int64_t>(shape)), dtype, Device::cpu(), nullptr);
}

// A split's (x, y) as symbolic tensors, from what its files' headers say: the IDX shorthand's images
// and labels (their counts and the images' shape checked as loading them would), or for a pipeline one
// batch of `batch` rows shaped as the model's input, with one u8 label each (the planner's convention,
// plan/config_workload.h) or, from a text or tokens source, (batch, sequence_length) int32 next tokens;
// the pipeline built (its steps checked, its files listed) and not iterated.
std::pair<Tensor, Tensor> split_from_headers(const Json& split, const nn::Model& model, const std::string& section,
                                             int64_t batch) {
  const nn::Dims& input = model.inputs()[0].shape();
  if (is_pipeline_split(split)) {
    (void)dataset_from_config(split, section, std::max<int64_t>(batch, 1), runtime_options().seed.value_or(0));
    std::vector<int64_t> shape(input.begin(), input.end());
    shape[0] = batch;
    if (is_token_split(split)) {  // language-model windows: the next token at each place
      const int64_t length = split.at("sequence_length").get<int64_t>();
      return {symbolic(shape, model.inputs()[0].dtype()), symbolic({batch, length}, DType::kI32)};
    }
    return {symbolic(shape, model.inputs()[0].dtype()), symbolic({batch}, DType::kU8)};
  }
  const std::string images_path = split.at("images").get<std::string>();
  const std::string labels_path = split.at("labels").get<std::string>();
  const data::IdxHeader images = data::read_idx_header(images_path), labels = data::read_idx_header(labels_path);
  if (images.shape[0] != labels.shape[0]) {
    throw DataError(fmt::format("{}: {} images ({}) but {} labels ({})", section, images.shape[0], images_path,
                                labels.shape[0], labels_path));
  }
  std::vector<int64_t> shape = {images.shape[0]};
  shape.insert(shape.end(), input.begin() + 1, input.end());
  int64_t per_sample = 1, per_input = 1;
  for (int i = 1; i < images.shape.rank(); ++i) per_sample *= images.shape[i];
  for (size_t i = 1; i < shape.size(); ++i) per_input *= shape[i];
  if (per_sample != per_input) {
    throw DataError(fmt::format("{}: the images of {} are {} ({} values each); the model's input_shape needs {}",
                                section, images_path, images.shape.to_string(), per_sample, per_input),
                    "make model.input_shape match the images");
  }
  return {symbolic(shape, DType::kF32), symbolic(labels.shape.to_vector(), labels.dtype)};
}

std::string shape_text(const Tensor& tensor) {
  return fmt::format("{} {}", tensor.shape().to_string(), dtype_name(tensor.dtype()));
}

}  // namespace

CheckedRun check_run(const nlohmann::json& config, const RunOptions& options, DataReading data, std::ostream& out) {
  std::vector<std::string> checked = {"config: every key and value valid"};
  const AssumedDevices* assumed = options.assume_devices;
  const DeviceChoice device = configure_runtime_from_config(config, assumed);
  out << "device: " << device.to_string() << "\n" << std::flush;
  checked.push_back(
      trains_on_assumed_device(config, assumed)
          ? fmt::format("runtime.device: {} of --assume-devices {}", device.device.to_string(), assumed->to_string())
          : fmt::format("device: {}, present", device.to_string()));
  nn::Model model = model_from_train_config(config);
  const Json& fit = config.at("fit");
  if (fit.at("verbose").get<int>() > 0) out << model.summary_string();
  checked.push_back(fmt::format("model: {} parameters, runtime.precision {}", model.count_params(),
                                config.at("runtime").value("precision", std::string("float32"))));

  const Json& sections = config.at("data");
  TrainingData train_data;
  if (data == DataReading::kContents) {
    train_data = training_data_from_config(config, model);
  } else {
    if (is_pipeline_split(sections.at("train")) && !fit.at("batch_size").is_number_integer()) {
      // As training_data_from_config refuses it.
      throw InvalidArgument("fit.batch_size: auto needs the IDX form of data.train (a pipeline batches as it is built)",
                            "give fit.batch_size a number");
    }
    const int64_t batch = fit.at("batch_size").is_number_integer() ? fit.at("batch_size").get<int64_t>() : 1;
    auto [x, y] = split_from_headers(sections.at("train"), model, "data.train", batch);
    train_data = {x, y, std::nullopt};
  }
  checked.push_back(fmt::format("data.train: x {}, y {}", shape_text(train_data.x), shape_text(train_data.y)));
  std::optional<std::pair<Tensor, Tensor>> validation_data;
  if (sections.contains("validation")) {
    if (data == DataReading::kContents) {
      validation_data = load_idx_split(sections.at("validation"), model, "data.validation");
    } else {
      const auto [x, y] = split_from_headers(sections.at("validation"), model, "data.validation", 1);
      checked.push_back(fmt::format("data.validation: x {}, y {}", shape_text(x), shape_text(y)));
    }
  }

  // Made in place: a trainer moved after tracing traces again.
  auto trainer = std::make_unique<Trainer>(compile_from_config(model, config, assumed));
  const distribute::Strategy* strategy = trainer->strategy();
  if (trains_on_assumed_device(config, assumed)) {  // the trainer traces one replica's step on the CPU
    checked.push_back(fmt::format("strategy: {}, {} replica(s) on GPUs of --assume-devices",
                                  strategy_type_from_config(config), replicas_in_sync(config, *trainer, assumed)));
  } else {
    checked.push_back(fmt::format("strategy: {}, {} replica(s)", strategy ? strategy->name() : "one_device",
                                  strategy ? strategy->num_replicas_in_sync() : 1));
  }
  MemoryDecision memory = check_memory_before_fit(*trainer, train_data.x, train_data.y, config, out, assumed);
  checked.push_back(fmt::format("memory: batch {} as {} micro-batch(es) of {}{}: {}", memory.batch_size,
                                memory.gradient_accumulation, memory.micro_batch(),
                                memory.replicas > 1 ? fmt::format(" on each of {} replicas", memory.replicas) : "",
                                needs(memory.step, memory.available_bytes)));
  if (!memory.reason.empty()) checked.push_back("memory: " + memory.reason);

  std::optional<TrainingPosition> resumed;
  if (options.start == RunStart::kResume) {
    if (!model.built()) (void)model(rows(train_data.x, 0, 1), false);
    resumed = resume_position(*trainer, config, options, out);
    checked.push_back(fmt::format("--resume {}: from global step {}", options.run_dir, resumed->global_step));
  }
  if (options.monitoring != nullptr && options.monitoring->metrics_port) {
    check_metrics_port_free(*options.monitoring);
    checked.push_back(fmt::format("--metrics-port {}: free", *options.monitoring->metrics_port));
  }
  return {.device = device,
          .trainer = std::move(trainer),
          .train_data = std::move(train_data),
          .validation_data = std::move(validation_data),
          .memory = std::move(memory),
          .resumed = resumed,
          .checked = std::move(checked)};
}

nlohmann::json dry_run(const nlohmann::json& config, const RunOptions& options) {
  std::ostream discarded(nullptr);  // what a run prints before its first step: the report says it shortly
  const CheckedRun checked = check_run(config, options, DataReading::kHeaders, discarded);
  return {{"checked", checked.checked},
          {"device", config.at("runtime").at("device")},
          {"micro_batch", checked.memory.micro_batch()},
          {"gradient_accumulation", checked.memory.gradient_accumulation},
          {"memory", checked.memory.to_json()}};
}

}  // namespace nimbus::train
