#include "nimbus/train/callbacks.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "nimbus/base/error.h"

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

}  // namespace nimbus::train
