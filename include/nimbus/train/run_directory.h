// The run directory (`nimbus train --run-dir DIR`, default runs/<date-time>): everything a
// training run writes, and what `--resume DIR`, `nimbus evaluate DIR` and `nimbus predict DIR` read.
//
//   runs/2026-11-30T15-40-02/
//     config.json     the config as run, every default filled in
//     summary.json    samples_per_sec, samples_total, steps, wall_seconds, device, peak_memory_bytes, ...
//     metrics.jsonl   one JSON object per step and per epoch (MetricsLogger)
//     checkpoints/    ckpt-<global step>.safetensors (checkpoint.h), best.safetensors
//     tensorboard/    train/ and validation/ event files (tensorboard.h)
//     trace.json      the last steps' timeline (monitor/trace.h)
//     nimbus.lock     the claim of the process writing here (run_claim.h)
//
//   train::RunClaim claim(dir, train::RunStart::kNew, std::cout);   // first: one run per folder
//   train::RunDirectory run(dir);
//   run.write_config(config);  run.create_folders();
//   auto metrics = std::make_shared<train::MetricsLogger>(run.metrics_path());
//   metrics->add_step_fields([](train::Trainer&, nlohmann::ordered_json& line) { line["input_wait"] = 0.1; });
//   trainer.fit(x, y, {.callbacks = {metrics}});
//
// metrics.jsonl lines (the schema `nimbus doctor` and the monitor read):
//   {"type":"step","epoch":E,"step":S,"time":T,"step_seconds":D,"samples":B,"loss":...,"<metric>":...}
//     E from 1; S the global step from 1; T unix seconds; D the step's seconds; B its samples;
//     the metrics are the epoch's running values so far (Keras's batch logs).
//   {"type":"epoch","epoch":E,"time":T,"elapsed_seconds":A,"loss":...,"val_loss":...,...}
//     A: training seconds since the run began, at the epoch's end (validation included).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/train/trainer.h"

namespace nimbus::train {

// The local date and time as run directories are named by it: 2026-11-30T15-40-02.
std::string run_dir_timestamp();

// A fresh folder runs/<local date-time>, e.g. runs/2026-11-30T15-40-02, created here; a run started
// in the same second gets runs/2026-11-30T15-40-02-2 (and -3, ...).
std::string default_run_dir();

// Refuses (InvalidArgument naming `path` and `flag`) an output path that is one of a run directory's
// own files (RunDirectory::owns), of any run directory above it: `predict -o`, `report -o`, `--summary`.
void refuse_output_onto_a_run_file(const std::string& path, const std::string& flag);

class MetricsLogger;

// What the config's checkpoint and tensorboard sections say (docs/training.md).
struct RunSettings {
  int64_t save_freq = 0;  // checkpoint.save_freq: 0 at each epoch's end, N every N steps
  int max_to_keep = 3;
  bool save_best = true;  // also keep best.safetensors, by `monitor`
  std::string monitor = "val_loss";
  int64_t tensorboard_update_freq = 0;
  bool write_checkpoints = true;  // false on multi-worker workers other than rank 0
};

// The folder's names, and what the run writes into it. Constructing one touches nothing on disk:
// a run claims its folder first (run_claim.h), then create_folders() and the writers below.
class RunDirectory {
 public:
  explicit RunDirectory(std::string path);
  const std::string& path() const { return path_; }
  std::string config_path() const { return path_ + "/config.json"; }
  std::string summary_path() const { return path_ + "/summary.json"; }
  std::string metrics_path() const { return path_ + "/metrics.jsonl"; }
  std::string trace_path() const { return path_ + "/trace.json"; }
  std::string oom_checkpoint() const { return path_ + "/oom_checkpoint.safetensors"; }
  // The advisory lock a running nimbus holds (run_claim.h); it holds the holder's PID.
  std::string lock_path() const { return path_ + "/nimbus.lock"; }
  std::string checkpoints() const { return path_ + "/checkpoints"; }
  std::string tensorboard() const { return path_ + "/tensorboard"; }
  // The folder's checkpoints/ pattern for ModelCheckpoint: ckpt-{step:08d}.safetensors.
  std::string checkpoint_pattern() const { return checkpoints() + "/ckpt-{step:08d}.safetensors"; }
  std::string best_checkpoint() const { return checkpoints() + "/best.safetensors"; }

  // Whether a run wrote here: config.json, summary.json, metrics.jsonl, trace.json, the OOM checkpoint,
  // or anything in checkpoints/ or tensorboard/. The lock file and empty folders are no run: they are
  // what a process killed between its claim and config.json leaves.
  bool holds_a_run() const;
  // Whether checkpoints/ holds any file (intact or not).
  bool has_checkpoint_files() const;
  // Whether `file` is one of the run's own files (the ones holds_a_run() names, the lock, anything
  // under checkpoints/, tensorboard/ or a worker-N/ folder), however the path is spelt.
  bool owns(const std::string& file) const;

  // Creates checkpoints/ and tensorboard/ (the folder itself is the claim's).
  void create_folders() const;
  // Writes config.json (atomically: a kill leaves the old file or the new one).
  void write_config(const nlohmann::json& config) const;

  // The callbacks that fill the folder: MetricsLogger, TensorBoard, ModelCheckpoint (every
  // save_freq, and the best one) and CheckpointOnSignal. `resumed`: the position the run continues from.
  std::vector<std::shared_ptr<Callback>> callbacks(const RunSettings& settings,
                                                   const std::optional<TrainingPosition>& resumed = std::nullopt);
  MetricsLogger& metrics() { return *metrics_; }
  // Writes summary.json after fit and returns it: samples_per_sec (of this process's fit),
  // samples_total, steps, wall_seconds (training time of the whole run, resumed parts added up),
  // device (the trainer's, e.g. cuda:0), device_count and device_names (the devices its replicas ran
  // on in this process, by hardware name), peak_memory_bytes (the peak bytes in use of the trainer's
  // device's allocator: the model's memory, which runtime.memory.limit caps), peak_host_memory_bytes
  // (host pipeline memory's peak: the data set in memory, pipeline buffers; device/host_memory.h),
  // host_peak_rss_bytes (the process's peak resident memory, VmHWM), final (the last
  // epoch's val_* logs), epochs (metrics.jsonl's epoch lines) and interrupted (a signal stopped it),
  // plus the top-level fields of `extra` (what the caller decided: micro_batch, memory, ...).
  nlohmann::json finish(const History& history, const Trainer& trainer, const nlohmann::json& extra = {});

 private:
  std::string path_;
  std::shared_ptr<MetricsLogger> metrics_;
};

// Writes metrics.jsonl (schema above), one line per step and per epoch, flushed as written.
class MetricsLogger : public Callback {
 public:
  // Starts `path` afresh. With `resume_at` (the restored checkpoint's position) it appends instead,
  // after dropping the lines past that position (steps a killed process ran after its last
  // checkpoint, a torn last line); the kept epoch lines count in epochs().
  explicit MetricsLogger(std::string path, std::optional<TrainingPosition> resume_at = std::nullopt);
  ~MetricsLogger() override;
  MetricsLogger(const MetricsLogger&) = delete;
  MetricsLogger& operator=(const MetricsLogger&) = delete;
  // Adds fields to every step line (after the standard ones).
  using StepFields = std::function<void(Trainer&, nlohmann::ordered_json& line)>;
  void add_step_fields(StepFields fields) { step_fields_.push_back(std::move(fields)); }
  // One object per epoch of the run: "epoch", the logs by Keras name, "elapsed_seconds".
  const std::vector<nlohmann::ordered_json>& epochs() const { return epochs_; }

  void on_train_begin(Trainer&) override;
  void on_train_batch_end(Trainer& trainer, int64_t step, const Logs& logs) override;
  void on_epoch_end(Trainer& trainer, int epoch, const Logs& logs) override;
  void on_train_end(Trainer&) override;

 private:
  void write(const nlohmann::ordered_json& line);
  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<StepFields> step_fields_;
  std::vector<nlohmann::ordered_json> epochs_;
};

}  // namespace nimbus::train
