#include "nimbus/train/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "nimbus/device/device_choice.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/train/checkpoint.h"
#include "nimbus/train/memory_check.h"
#include "nimbus/train/run_claim.h"
#include "nimbus/train/run_directory.h"
#include "rows.h"

namespace nimbus::train {

using Json = nlohmann::json;

namespace {

// Multi-worker: every worker waits where rank 0 saves a checkpoint (after rank 0's save, the callbacks
// running in order), so that a checkpoint is whole before any worker goes on.
class BarrierAfterCheckpoints : public Callback {
 public:
  BarrierAfterCheckpoints(distribute::Strategy& strategy, int64_t save_freq)
      : strategy_(strategy), save_freq_(save_freq) {}
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs&) override {
    if (save_freq_ > 0 && trainer.position().global_step % save_freq_ == 0) strategy_.barrier();
  }
  void on_epoch_end(Trainer&, int, const Logs&) override {
    if (save_freq_ == 0) strategy_.barrier();
  }

 private:
  distribute::Strategy& strategy_;
  int64_t save_freq_;
};

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

}  // namespace

nlohmann::json run_config(const nlohmann::json& config, std::ostream& out, const RunOptions& options) {
  const DeviceChoice device = configure_runtime_from_config(config);
  out << "device: " << device.to_string() << "\n" << std::flush;
  nn::Model model = model_from_train_config(config);
  const Json& fit_section = config.at("fit");
  if (fit_section.at("verbose").get<int>() > 0) out << model.summary_string();

  const Json& data = config.at("data");
  const TrainingData train_data = training_data_from_config(config, model);
  const Tensor& x_train = train_data.x;
  const Tensor& y_train = train_data.y;
  FitOptions fit;
  fit.epochs = fit_section.at("epochs").get<int>();
  fit.shuffle = fit_section.at("shuffle").get<bool>();
  fit.seed = runtime_options().seed;
  if (fit_section.contains("steps_per_epoch") && !fit_section["steps_per_epoch"].is_null()) {
    fit.steps_per_epoch = fit_section["steps_per_epoch"].get<int64_t>();
  }
  fit.initial_epoch = fit_section.at("initial_epoch").get<int>();
  fit.verbose = fit_section.at("verbose").get<int>();
  fit.output = &out;
  if (data.contains("validation")) {
    fit.validation_data = load_idx_split(data.at("validation"), model, "data.validation");
  }

  Trainer trainer = compile_from_config(model, config);
  const MemoryDecision memory = check_memory_before_fit(trainer, x_train, y_train, config, out);
  fit.batch_size = memory.batch_size;
  fit.gradient_accumulation = memory.gradient_accumulation;
  // Everything that can refuse the start is checked before the run directory is claimed or written.
  std::optional<TrainingPosition> resumed;
  if (options.start == RunStart::kResume) {
    if (!model.built()) (void)model(rows(x_train, 0, 1), false);
    resumed = resume_position(trainer, config, options, out);
    if (resumed->global_step > 0) fit = Trainer::resumed(fit, *resumed);
  }
  if (options.monitoring != nullptr) check_metrics_port_free(*options.monitoring);

  // Multi-worker: rank 0 claims (and with --overwrite moves aside) the run directory before the
  // workers claim their folders inside it.
  std::optional<RunClaim> claim;
  const bool worker = !options.chief_run_dir.empty();
  const std::string run_path = options.run_dir.empty() ? default_run_dir() : options.run_dir;
  if (!worker) claim.emplace(run_path, options.start, out);
  if (trainer.strategy() != nullptr && trainer.strategy()->num_workers() > 1) trainer.strategy()->barrier();
  if (worker) claim.emplace(run_path, options.start == RunStart::kOverwrite ? RunStart::kNew : options.start, out);
  RunDirectory run(run_path);
  if (fit.verbose > 0) out << "Run directory: " << run.path() << "\n" << std::flush;
  run.write_config(config);
  run.create_folders();

  const Json& checkpoint = config.at("checkpoint");
  const Json& tensorboard = config.at("tensorboard");
  RunSettings settings{
      .save_freq = checkpoint.at("save_freq").is_number() ? checkpoint.at("save_freq").get<int64_t>() : 0,
      .max_to_keep = checkpoint.at("max_to_keep").get<int>(),
      .save_best = checkpoint.at("save_best").get<bool>(),
      .monitor = checkpoint.contains("monitor") && checkpoint["monitor"].is_string()
                     ? checkpoint["monitor"].get<std::string>()
                     : (fit.validation_data ? "val_loss" : "loss"),
      .tensorboard_update_freq =
          tensorboard.at("update_freq").is_number() ? tensorboard.at("update_freq").get<int64_t>() : 0,
      .write_checkpoints = options.chief_run_dir.empty()};
  fit.callbacks = run.callbacks(settings, resumed);
  if (trainer.strategy() != nullptr && trainer.strategy()->num_workers() > 1) {
    fit.callbacks.push_back(std::make_shared<BarrierAfterCheckpoints>(*trainer.strategy(), settings.save_freq));
  }

  // The monitor records samples and the timeline in the run directory (and serves /metrics when
  // asked); the run directory's step lines carry the profiler's spans of the step being logged.
  monitor::RunMonitorOptions monitoring = options.monitoring ? *options.monitoring : monitor::RunMonitorOptions{};
  monitoring.run_dir = run.path();
  monitoring.step_lines = false;
  monitoring.device = trainer.device();
  monitor::RunMonitor monitor(monitoring, std::cerr);
  monitor.attach(trainer.profiler());
  run.metrics().add_step_fields([device = monitoring.device](Trainer& trainer, nlohmann::ordered_json& line) {
    const Json fields = monitor::step_line_fields(trainer.profiler().current_step(), device);
    for (const auto& [name, value] : fields.items()) line[name] = value;
  });
  const std::string oom_checkpoint = run.oom_checkpoint();
  const History history = train_data.pipeline
                              ? fit_saving_on_out_of_memory(trainer, *train_data.pipeline, fit, config, oom_checkpoint)
                              : fit_saving_on_out_of_memory(trainer, x_train, y_train, fit, config, oom_checkpoint);
  Json extra = {{"run_dir", run.path()},
                {"device_reason", device.reason},
                {"micro_batch", memory.micro_batch()},
                {"gradient_accumulation", memory.gradient_accumulation},
                {"memory", memory.to_json()}};
  // What the input pipeline did in the last epoch: per node, parallelism and buffers (AUTOTUNE's
  // choices, with why), busy and wait times.
  if (!history.input_pipeline_stats.empty()) extra["input_pipeline"] = Json::parse(history.input_pipeline_stats);
  extra.update(monitor::summary_fields(trainer.profiler().totals()));
  Json summary = run.finish(history, trainer, extra);
  monitor.finish();
  return summary;
}

}  // namespace nimbus::train
