#include "nimbus/train/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "nimbus/device/device_choice.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/train/run_checks.h"
#include "nimbus/train/run_claim.h"
#include "nimbus/train/run_directory.h"

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

}  // namespace

nlohmann::json run_config(const nlohmann::json& config, std::ostream& out, const RunOptions& options) {
  // Everything that can refuse the start is checked before the run directory is claimed or written.
  CheckedRun checked = check_run(config, options, DataReading::kContents, out);
  Trainer& trainer = *checked.trainer;
  const TrainingData& train_data = checked.train_data;
  const MemoryDecision& memory = checked.memory;
  const std::optional<TrainingPosition>& resumed = checked.resumed;
  const Json& fit_section = config.at("fit");
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
  fit.validation_data = checked.validation_data;
  fit.batch_size = memory.batch_size;
  fit.gradient_accumulation = memory.gradient_accumulation;
  if (resumed && resumed->global_step > 0) fit = Trainer::resumed(fit, *resumed);

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
  const uint64_t step_bytes = memory.step.memory.step_bytes();
  const History history =
      train_data.pipeline
          ? fit_saving_on_out_of_memory(trainer, *train_data.pipeline, fit, config, step_bytes, oom_checkpoint)
          : fit_saving_on_out_of_memory(trainer, train_data.x, train_data.y, fit, config, step_bytes, oom_checkpoint);
  Json extra = {{"run_dir", run.path()},
                {"device_reason", checked.device.reason},
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
