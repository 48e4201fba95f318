#include "nimbus/train/callbacks.h"

#include <fmt/args.h>
#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "nimbus/base/error.h"
#include "nimbus/train/checkpoint.h"

namespace nimbus::train {

namespace {

// Whether larger values of `monitor` are better.
bool maximize(const std::string& monitor, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  if (mode != "auto") throw InvalidArgument(fmt::format("mode must be auto, min or max, got '{}'", mode));
  return monitor.find("acc") != std::string::npos || monitor.find("auc") != std::string::npos ||
         monitor.find("precision") != std::string::npos || monitor.find("recall") != std::string::npos;
}

double monitored(const Logs& logs, const std::string& monitor, const char* callback) {
  const auto it = logs.find(monitor);
  if (it != logs.end()) return it->second;
  std::string names;
  for (const auto& [name, value] : logs) names += (names.empty() ? "" : ", ") + name;
  throw InvalidArgument(fmt::format("{}: the logs have no '{}' (they have {})", callback, monitor, names),
                        monitor.rfind("val_", 0) == 0 ? "pass validation_data to fit" : "");
}

// Tracks the best value of a metric and the epochs since it improved.
struct Plateau {
  bool larger_is_better;
  double min_delta;
  double best;
  int wait = 0;
  Plateau(bool larger, double delta)
      : larger_is_better(larger),
        min_delta(std::abs(delta)),
        best(larger ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {}
  // True when `value` improves on the best (and becomes it).
  bool update(double value) {
    const bool better = larger_is_better ? value - min_delta > best : value + min_delta < best;
    if (better) {
      best = value;
      wait = 0;
    } else {
      ++wait;
    }
    return better;
  }
};

class EarlyStoppingCallback : public Callback {
 public:
  explicit EarlyStoppingCallback(EarlyStoppingOptions options)
      : options_(std::move(options)), plateau_(maximize(options_.monitor, options_.mode), options_.min_delta) {}
  void on_train_begin(Trainer&) override {
    plateau_ = Plateau(plateau_.larger_is_better, options_.min_delta);
    best_weights_.clear();
  }
  void on_epoch_end(Trainer& trainer, int, const Logs& logs) override {
    if (plateau_.update(monitored(logs, options_.monitor, "EarlyStopping"))) {
      if (options_.restore_best_weights) {
        best_weights_.clear();
        for (const Variable& v : trainer.model().weights()) best_weights_.push_back(v.value().clone());
      }
      return;
    }
    if (plateau_.wait > options_.patience - 1 || options_.patience == 0) {
      trainer.stop_training = true;
      if (options_.restore_best_weights && !best_weights_.empty()) {
        std::vector<Variable> weights = trainer.model().weights();
        for (size_t i = 0; i < weights.size(); ++i) weights[i].assign(best_weights_[i]);
      }
    }
  }

 private:
  EarlyStoppingOptions options_;
  Plateau plateau_;
  std::vector<Tensor> best_weights_;
};

class ReduceLROnPlateauCallback : public Callback {
 public:
  explicit ReduceLROnPlateauCallback(ReduceLROnPlateauOptions options)
      : options_(std::move(options)), plateau_(maximize(options_.monitor, options_.mode), options_.min_delta) {
    if (!(options_.factor > 0 && options_.factor < 1)) {
      throw InvalidArgument(fmt::format("ReduceLROnPlateau: factor must be in (0, 1), got {}", options_.factor));
    }
  }
  void on_epoch_end(Trainer& trainer, int, const Logs& logs) override {
    const double value = monitored(logs, options_.monitor, "ReduceLROnPlateau");
    if (cooldown_ > 0) {
      --cooldown_;
      plateau_.wait = 0;
    }
    if (plateau_.update(value) || plateau_.wait < options_.patience) return;
    const double rate = trainer.optimizer().current_learning_rate();
    const double reduced = std::max(rate * options_.factor, options_.min_lr);
    if (reduced < rate) trainer.optimizer().set_learning_rate(reduced);
    cooldown_ = options_.cooldown;
    plateau_.wait = 0;
  }

 private:
  ReduceLROnPlateauOptions options_;
  Plateau plateau_;
  int cooldown_ = 0;
};

class LearningRateSchedulerCallback : public Callback {
 public:
  explicit LearningRateSchedulerCallback(std::function<double(int, double)> schedule)
      : schedule_(std::move(schedule)) {}
  void on_epoch_begin(Trainer& trainer, int epoch) override {
    Optimizer& optimizer = trainer.optimizer();
    optimizer.set_learning_rate(schedule_(epoch - 1, optimizer.current_learning_rate()));
  }

 private:
  std::function<double(int, double)> schedule_;
};

class CSVLoggerCallback : public Callback {
 public:
  CSVLoggerCallback(std::string path, bool append) : path_(std::move(path)), append_(append) {}
  void on_train_begin(Trainer&) override {
    out_.open(path_, append_ ? std::ios::app : std::ios::trunc);
    if (!out_) throw NotFound(fmt::format("CSVLogger: cannot write {}", path_));
    header_written_ = append_ && out_.tellp() > 0;
  }
  void on_epoch_end(Trainer&, int epoch, const Logs& logs) override {
    if (!header_written_) {
      out_ << "epoch";
      for (const auto& [name, value] : logs) out_ << "," << name;
      out_ << "\n";
      header_written_ = true;
    }
    out_ << epoch - 1;
    for (const auto& [name, value] : logs) out_ << "," << fmt::format("{}", value);
    out_ << "\n" << std::flush;
  }
  void on_train_end(Trainer&) override { out_.close(); }

 private:
  std::string path_;
  bool append_;
  bool header_written_ = false;
  std::ofstream out_;
};

class ModelCheckpointCallback : public Callback {
 public:
  explicit ModelCheckpointCallback(ModelCheckpointOptions options)
      : options_(std::move(options)), plateau_(maximize(options_.monitor, options_.mode), 0) {
    if (options_.filepath.empty()) throw InvalidArgument("ModelCheckpoint: filepath is empty");
    if (options_.save_freq < 0 || options_.max_to_keep < 0) {
      throw InvalidArgument(fmt::format("ModelCheckpoint: save_freq ({}) and max_to_keep ({}) must be >= 0",
                                        options_.save_freq, options_.max_to_keep));
    }
  }
  void on_train_begin(Trainer&) override {
    kept_.clear();
    if (options_.max_to_keep == 0) return;
    // Files of an earlier process (a resumed run) count towards max_to_keep, oldest first.
    const std::filesystem::path pattern(glob_of(options_.filepath));
    const std::string folder = pattern.parent_path().empty() ? "." : pattern.parent_path().string();
    std::vector<CheckpointInfo> existing = list_checkpoints(folder, std::cerr);
    for (auto it = existing.rbegin(); it != existing.rend(); ++it) {
      const std::string name = std::filesystem::path(it->path).filename().string();
      if (fnmatch(pattern.filename().c_str(), name.c_str(), 0) == 0) kept_.push_back(it->path);
    }
  }
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs& logs) override {
    if (options_.save_freq > 0 && trainer.position().global_step % options_.save_freq == 0) save(trainer, logs);
  }
  void on_epoch_end(Trainer& trainer, int, const Logs& logs) override {
    if (options_.save_freq == 0) save(trainer, logs);
  }

 private:
  // The filepath with each {field} as *, to find the files it names.
  static std::string glob_of(const std::string& filepath) {
    std::string glob;
    for (size_t i = 0; i < filepath.size(); ++i) {
      if (filepath[i] != '{') {
        glob += filepath[i];
        continue;
      }
      i = filepath.find('}', i);
      if (i == std::string::npos) break;
      glob += '*';
    }
    return glob;
  }

  void save(Trainer& trainer, const Logs& logs) {
    if (options_.save_best_only && !plateau_.update(monitored(logs, options_.monitor, "ModelCheckpoint"))) return;
    const TrainingPosition& position = trainer.position();
    fmt::dynamic_format_arg_store<fmt::format_context> fields;
    fields.push_back(fmt::arg("epoch", position.epochs_done + (position.steps_in_epoch > 0 ? 1 : 0)));
    fields.push_back(fmt::arg("step", position.global_step));
    for (const auto& [name, value] : logs) fields.push_back(fmt::arg(name.c_str(), value));
    std::string path;
    try {
      path = fmt::vformat(options_.filepath, fields);
    } catch (const fmt::format_error& error) {
      throw InvalidArgument(
          fmt::format("ModelCheckpoint: cannot fill in filepath '{}': {}", options_.filepath, error.what()),
          "its fields are {epoch}, {step} and the logged metrics, e.g. {val_loss:.4f}");
    }
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder);
    trainer.save_checkpoint(path);
    if (options_.max_to_keep == 0) return;
    if (std::find(kept_.begin(), kept_.end(), path) == kept_.end()) kept_.push_back(path);
    // Older files go only after the new one is complete, so a kill leaves at least one.
    while (kept_.size() > static_cast<size_t>(options_.max_to_keep)) {
      std::filesystem::remove(kept_.front());
      kept_.erase(kept_.begin());
    }
  }

  ModelCheckpointOptions options_;
  Plateau plateau_;
  std::vector<std::string> kept_;
};

class TerminateOnNaNCallback : public Callback {
 public:
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs& logs) override {
    const auto it = logs.find("loss");
    if (it != logs.end() && !std::isfinite(it->second)) trainer.stop_training = true;
  }
};

}  // namespace

std::shared_ptr<Callback> EarlyStopping(const EarlyStoppingOptions& options) {
  return std::make_shared<EarlyStoppingCallback>(options);
}
std::shared_ptr<Callback> ReduceLROnPlateau(const ReduceLROnPlateauOptions& options) {
  return std::make_shared<ReduceLROnPlateauCallback>(options);
}
std::shared_ptr<Callback> LearningRateScheduler(std::function<double(int, double)> schedule) {
  return std::make_shared<LearningRateSchedulerCallback>(std::move(schedule));
}
std::shared_ptr<Callback> CSVLogger(const std::string& path, bool append) {
  return std::make_shared<CSVLoggerCallback>(path, append);
}
std::shared_ptr<Callback> TerminateOnNaN() { return std::make_shared<TerminateOnNaNCallback>(); }
std::shared_ptr<Callback> ModelCheckpoint(const ModelCheckpointOptions& options) {
  return std::make_shared<ModelCheckpointCallback>(options);
}

}  // namespace nimbus::train
