#include "nimbus/train/run_directory.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/host_memory.h"
#include "nimbus/device/memory.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/monitor/json_lines.h"
#include "nimbus/train/callbacks.h"
#include "nimbus/train/preemption.h"
#include "nimbus/train/tensorboard.h"
#include "wall_clock.h"

namespace nimbus::train {

namespace {

using OrderedJson = nlohmann::ordered_json;

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

int64_t host_peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace

std::string run_dir_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H-%M-%S", &local);
  return text.data();
}

std::string default_run_dir() {
  // Claim a folder of our own: runs started in the same second (tests, a job array) get -2, -3, ...
  std::filesystem::create_directories("runs");
  const std::string base = "runs/" + run_dir_timestamp();
  for (int suffix = 1;; ++suffix) {
    std::string path = suffix == 1 ? base : fmt::format("{}-{}", base, suffix);
    if (::mkdir(path.c_str(), 0777) == 0) return path;
    if (errno != EEXIST) {
      throw NotFound(fmt::format("{}: cannot create the run directory: {}", path, std::strerror(errno)));
    }
  }
}

void refuse_output_onto_a_run_file(const std::string& path, const std::string& flag) {
  std::error_code error;
  const std::filesystem::path file = std::filesystem::weakly_canonical(path, error);
  if (error) return;  // a path that cannot be resolved names no run's file; writing it fails by itself
  for (std::filesystem::path folder = file.parent_path(); !folder.empty(); folder = folder.parent_path()) {
    const RunDirectory run(folder.string());
    if ((run.holds_a_run() || std::filesystem::exists(run.lock_path())) && run.owns(file.string())) {
      throw InvalidArgument(
          fmt::format("{} {}: that is a file of the run in {}, which it would overwrite", flag, path, folder.string()),
          fmt::format("give {} a path outside the run's own files (config.json, metrics.jsonl, summary.json, "
                      "trace.json, checkpoints/, tensorboard/), e.g. beside them in {}",
                      flag, folder.string()));
    }
    if (folder == folder.root_path()) break;
  }
}

RunDirectory::RunDirectory(std::string path) : path_(std::move(path)) {}

bool RunDirectory::has_checkpoint_files() const {
  std::error_code error;
  return !std::filesystem::is_empty(checkpoints(), error) && !error;
}

bool RunDirectory::holds_a_run() const {
  for (const std::string& file : {config_path(), summary_path(), metrics_path(), trace_path(), oom_checkpoint()}) {
    if (std::filesystem::exists(file)) return true;
  }
  std::error_code error;
  return has_checkpoint_files() || (!std::filesystem::is_empty(tensorboard(), error) && !error);
}

bool RunDirectory::owns(const std::string& file) const {
  std::error_code error;
  const std::filesystem::path folder = std::filesystem::weakly_canonical(path_, error);
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(file, error);
  if (error) return false;
  const std::filesystem::path relative = canonical.lexically_relative(folder);
  if (relative.empty() || *relative.begin() == "..") return false;
  const std::string first = relative.begin()->string();
  if (first == "." || first == "checkpoints" || first == "tensorboard" || first.starts_with("worker-")) return true;
  return std::distance(relative.begin(), relative.end()) == 1 &&
         (first == "config.json" || first == "summary.json" || first == "metrics.jsonl" || first == "trace.json" ||
          first == "oom_checkpoint.safetensors" || first == "nimbus.lock");
}

void RunDirectory::create_folders() const {
  std::error_code error;
  for (const std::string& folder : {checkpoints(), tensorboard()}) {
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
  // The devices the model's replicas ran on in this process (one without a replicating strategy).
  const std::vector<Device> devices =
      trainer.strategy() != nullptr ? trainer.strategy()->devices() : std::vector<Device>{trainer.device()};
  nlohmann::ordered_json device_names = nlohmann::ordered_json::array();
  for (const Device& device : devices) device_names.push_back(backend(device.type).device_name(device.index));
  nlohmann::ordered_json summary = {
      {"samples_per_sec", history.samples_per_sec},
      {"samples_total", position.samples},
      {"steps", position.global_step},
      {"wall_seconds", position.elapsed_seconds},
      {"device", trainer.device().to_string()},
      {"device_count", devices.size()},
      {"device_names", device_names},
      {"parameters", trainer.model().count_params()},
      {"peak_memory_bytes", memory_stats(trainer.device()).peak_bytes_in_use},
      {"peak_host_memory_bytes", host_memory_stats().peak_bytes_in_use},
      {"host_peak_rss_bytes", host_peak_rss_bytes()},
      {"final", nlohmann::ordered_json::object()},
      {"epochs", nlohmann::ordered_json::array()},
      {"interrupted", signal_received() != 0},
  };
  // Language models (token-sequence labels): samples_per_sec x tokens per sample.
  if (history.tokens_per_sec > 0) summary["tokens_per_sec"] = history.tokens_per_sec;
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
  std::string kept;
  // What a killed process left: its torn last line, and any malformed line, are dropped.
  const std::vector<OrderedJson> lines =
      std::filesystem::exists(path_) ? monitor::read_json_lines(path_).objects : std::vector<OrderedJson>{};
  for (const OrderedJson& line : lines) {
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
