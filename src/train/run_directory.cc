#include "nimbus/train/run_directory.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/device/host_memory.h"
#include "nimbus/device/memory.h"
#include "nimbus/train/callbacks.h"
#include "nimbus/train/preemption.h"
#include "nimbus/train/tensorboard.h"

namespace nimbus::train {

namespace {

using OrderedJson = nlohmann::ordered_json;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The epoch line's fields a summary keeps (all but "type" and "time").
OrderedJson epoch_record(const OrderedJson& line) {
  OrderedJson record = line;
  record.erase("type");
  record.erase("time");
  return record;
}

// Temporary file, then renamed over `path`: a reader (or a resume after a kill) sees one whole file.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  std::ofstream out(temporary, std::ios::trunc);
  out << text;
  out.close();
  if (!out || std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw Unavailable(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  }
}

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H-%M-%S", &local);
  // Claim a folder of our own: runs started in the same second (tests, a job array) get -2, -3, ...
  std::filesystem::create_directories("runs");
  const std::string base = std::string("runs/") + text.data();
  for (int suffix = 1;; ++suffix) {
    std::string path = suffix == 1 ? base : fmt::format("{}-{}", base, suffix);
    if (::mkdir(path.c_str(), 0777) == 0) return path;
    if (errno != EEXIST) {
      throw NotFound(fmt::format("{}: cannot create the run directory: {}", path, std::strerror(errno)));
    }
  }
}

RunDirectory::RunDirectory(std::string path) : path_(std::move(path)) {
  std::error_code error;
  for (const std::string& folder : {path_, checkpoints(), tensorboard()}) {
    std::filesystem::create_directories(folder, error);
    if (error) {
      throw NotFound(fmt::format("{}: cannot create the run directory: {}", folder, error.message()),
                     "pass --run-dir a folder you can write to");
    }
  }
}

void RunDirectory::write_config(const nlohmann::json& config) const {
  write_atomically(config_path(), config.dump(2) + "\n");
}

std::vector<std::shared_ptr<Callback>> RunDirectory::callbacks(const RunSettings& settings,
                                                               const std::optional<TrainingPosition>& resumed) {
  metrics_ = std::make_shared<MetricsLogger>(metrics_path(), resumed);
  std::vector<std::shared_ptr<Callback>> all = {
      metrics_, TensorBoard({.log_dir = tensorboard(), .update_freq = settings.tensorboard_update_freq})};
  if (settings.write_checkpoints) {
    all.push_back(ModelCheckpoint(
        {.filepath = checkpoint_pattern(), .save_freq = settings.save_freq, .max_to_keep = settings.max_to_keep}));
  }
  if (settings.write_checkpoints && settings.save_best) {
    all.push_back(
        ModelCheckpoint({.filepath = best_checkpoint(), .monitor = settings.monitor, .save_best_only = true}));
  }
  all.push_back(CheckpointOnSignal(checkpoint_pattern()));
  return all;
}

nlohmann::json RunDirectory::finish(const History& history, const Trainer& trainer, const nlohmann::json& extra) {
  const TrainingPosition& position = trainer.position();
  nlohmann::ordered_json summary = {
      {"samples_per_sec", history.samples_per_sec},
      {"samples_total", position.samples},
      {"steps", position.global_step},
      {"wall_seconds", position.elapsed_seconds},
      {"device", trainer.device().to_string()},
      {"parameters", trainer.model().count_params()},
      {"peak_memory_bytes", memory_stats(trainer.device()).peak_bytes_in_use},
      {"peak_host_memory_bytes", host_memory_stats().peak_bytes_in_use},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"final", nlohmann::ordered_json::object()},
      {"epochs", nlohmann::ordered_json::array()},
      {"interrupted", signal_received() != 0},
  };
  if (metrics_) {
    for (const auto& epoch : metrics_->epochs()) summary["epochs"].push_back(epoch);
  }
  if (!summary["epochs"].empty()) {
    for (const auto& [name, value] : summary["epochs"].back().items()) {
      if (name.rfind("val_", 0) == 0) summary["final"][name] = value;
    }
  }
  if (extra.is_object()) {
    for (const auto& [name, value] : extra.items()) summary[name] = value;
  }
  write_atomically(summary_path(), summary.dump(2) + "\n");
  return nlohmann::json::parse(summary.dump());
}

MetricsLogger::MetricsLogger(std::string path, std::optional<TrainingPosition> resume_at) : path_(std::move(path)) {
  if (!resume_at) {
    std::ofstream fresh(path_, std::ios::trunc);
    if (!fresh) throw NotFound(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
    return;
  }
  std::ifstream in(path_);
  std::string text, kept;
  while (std::getline(in, text)) {
    const OrderedJson line = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded() || !line.is_object()) continue;  // a line torn by a kill
    const std::string type = line.value("type", "");
    if (type == "step" && line.value("step", int64_t{0}) > resume_at->global_step) continue;
    if (type == "epoch") {
      if (line.value("epoch", 0) > resume_at->epochs_done) continue;
      epochs_.push_back(epoch_record(line));
    }
    kept += line.dump() + "\n";
  }
  write_atomically(path_, kept);
}

MetricsLogger::~MetricsLogger() {
  if (file_) std::fclose(file_);
}

void MetricsLogger::on_train_begin(Trainer&) {
  if (file_) std::fclose(file_);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw NotFound(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
}

void MetricsLogger::write(const OrderedJson& line) {
  const std::string text = line.dump() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
    throw Unavailable(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  }
}

void MetricsLogger::on_train_batch_end(Trainer& trainer, int64_t, const Logs& logs) {
  const TrainingPosition& position = trainer.position();
  OrderedJson line = {{"type", "step"},
                      {"epoch", position.epochs_done + 1},
                      {"step", position.global_step},
                      {"time", unix_seconds()},
                      {"step_seconds", trainer.last_step.seconds},
                      {"samples", trainer.last_step.samples},
                      {"batch_loss", trainer.last_step.loss}};
  for (const auto& [name, value] : logs) line[name] = value;
  for (const StepFields& fields : step_fields_) fields(trainer, line);
  write(line);
}

void MetricsLogger::on_epoch_end(Trainer& trainer, int epoch, const Logs& logs) {
  OrderedJson line = {{"type", "epoch"},
                      {"epoch", epoch},
                      {"time", unix_seconds()},
                      {"elapsed_seconds", trainer.position().elapsed_seconds}};
  for (const auto& [name, value] : logs) line[name] = value;
  write(line);
  epochs_.push_back(epoch_record(line));
}

void MetricsLogger::on_train_end(Trainer&) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace nimbus::train
