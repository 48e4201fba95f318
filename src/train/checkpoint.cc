// Training checkpoints: Trainer::save_checkpoint / restore_checkpoint, and finding the newest
// intact one in a folder.
#include "nimbus/train/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <tuple>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/data/tfrecord.h"
#include "nimbus/tensor/safetensors.h"

namespace nimbus::train {

namespace {

constexpr const char* kFormat = "nimbus-checkpoint";

// CRC-32C over every tensor (name, dtype, shape, bytes, in file order) and every metadata entry
// but the checksum itself: any change to what restore reads changes it.
std::string checksum(const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  uint32_t crc = 0;
  auto add = [&crc](std::string_view text) { crc = data::crc32c(text.data(), text.size(), crc); };
  for (const auto& [name, tensor] : tensors) {
    add(fmt::format("{}|{}|{}|", name, dtype_name(tensor.dtype()), tensor.shape().to_string()));
    const Tensor host = tensor.to(Device::cpu());
    crc = data::crc32c(host.raw_data(), host.nbytes(), crc);
  }
  for (const auto& [key, value] : metadata) {
    if (key != "checksum") add(fmt::format("{}={}|", key, value));
  }
  return fmt::format("crc32c:{:08x}", crc);
}

int64_t metadata_integer(const std::map<std::string, std::string>& metadata, const std::string& key,
                         const std::string& path) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw DataError(fmt::format("{}: checkpoint metadata lacks '{}'", path, key));
  try {
    size_t used = 0;
    const int64_t value = std::stoll(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  throw DataError(fmt::format("{}: checkpoint metadata '{}' is '{}', not an integer", path, key, it->second));
}

TrainingPosition position_of(const std::map<std::string, std::string>& metadata, const std::string& path) {
  const auto format = metadata.find("format");
  if (format == metadata.end() || format->second != kFormat) {
    throw DataError(fmt::format("{}: not a Nimbus training checkpoint (no format: {} in its metadata)", path, kFormat));
  }
  return {.epochs_done = static_cast<int>(metadata_integer(metadata, "epochs_done", path)),
          .steps_in_epoch = metadata_integer(metadata, "steps_in_epoch", path),
          .global_step = metadata_integer(metadata, "global_step", path),
          .shuffle_seed = static_cast<uint64_t>(metadata_integer(metadata, "shuffle_seed", path)),
          .samples = metadata_integer(metadata, "samples", path),
          .elapsed_seconds = static_cast<double>(metadata_integer(metadata, "elapsed_microseconds", path)) * 1e-6,
          .input_iterator = metadata.count("input_iterator") ? metadata.at("input_iterator") : std::string()};
}

// The file's tensors in file order, after its format and checksum are checked.
std::vector<std::pair<std::string, Tensor>> checked_tensors(const SafetensorsFile& file, const std::string& path) {
  position_of(file.metadata, path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : file.order) tensors.emplace_back(name, file.tensors.at(name));
  const auto recorded = file.metadata.find("checksum");
  if (recorded == file.metadata.end()) throw DataError(fmt::format("{}: the checkpoint has no checksum", path));
  const std::string actual = checksum(tensors, file.metadata);
  if (actual != recorded->second) {
    throw DataError(fmt::format("{}: checksum mismatch (recorded {}, computed {}): the file is corrupted", path,
                                recorded->second, actual),
                    "restore an older checkpoint (--resume and --checkpoint last fall back to it by themselves)");
  }
  return tensors;
}

}  // namespace

FitOptions Trainer::resumed(FitOptions options, const TrainingPosition& position) {
  options.initial_epoch = position.epochs_done;
  options.initial_step = position.steps_in_epoch;
  options.seed = position.shuffle_seed;
  options.initial_input_iterator = position.input_iterator;
  return options;
}

void Trainer::save_checkpoint(const std::string& path) const {
  if (!model_.built()) throw InvalidArgument("save_checkpoint: the model is not built yet");
  auto span = profiler_->span(monitor::Span::kCheckpoint);
  // The weights go to the trainer's device before the optimizer is built for them (it knows them by tensor).
  for (Variable& v : model_.weights()) v.place_on(device());
  options_.optimizer->build(model_.trainable_weights());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Variable& v : model_.weights()) tensors.emplace_back("model/" + v.name(), v.value());
  for (const Variable& v : options_.optimizer->variables()) tensors.emplace_back("optimizer/" + v.name(), v.value());
  // The running epoch's metric totals, so an epoch resumed in its middle reports what it would have.
  std::vector<std::shared_ptr<Metric>> metrics = {loss_mean_};
  metrics.insert(metrics.end(), metrics_.begin(), metrics_.end());
  for (size_t m = 0; m < metrics.size(); ++m) {
    const auto& totals = metrics[m]->totals();
    for (size_t s = 0; s < totals.size(); ++s) {
      tensors.emplace_back(fmt::format("metrics/{}/{}", m, s),
                           Tensor::from_vector<double>(totals[s], {static_cast<int64_t>(totals[s].size())}));
    }
  }
  std::map<std::string, std::string> metadata;
  const Generator& generator = default_generator();
  metadata["format"] = kFormat;
  metadata["epochs_done"] = std::to_string(position_.epochs_done);
  metadata["steps_in_epoch"] = std::to_string(position_.steps_in_epoch);
  metadata["global_step"] = std::to_string(position_.global_step);
  metadata["shuffle_seed"] = std::to_string(position_.shuffle_seed);
  metadata["samples"] = std::to_string(position_.samples);
  metadata["elapsed_microseconds"] = std::to_string(std::llround(position_.elapsed_seconds * 1e6));
  metadata["rng_seed"] = std::to_string(generator.seed());
  metadata["rng_offset"] = std::to_string(generator.offset());
  if (loss_scale_) {
    tensors.emplace_back("loss_scale/scale", loss_scale_->variable().value());
    metadata["loss_scale_good_steps"] = std::to_string(loss_scale_->good_steps());
    metadata["loss_scale_skipped_steps"] = std::to_string(loss_scale_->skipped_steps());
  }
  if (!position_.input_iterator.empty()) metadata["input_iterator"] = position_.input_iterator;
  metadata["checksum"] = checksum(tensors, metadata);
  write_safetensors(path, tensors, metadata);
}

TrainingPosition Trainer::restore_checkpoint(const std::string& path) {
  const SafetensorsFile file = read_safetensors(path);
  checked_tensors(file, path);
  TrainingPosition position = position_of(file.metadata, path);
  if (!model_.built()) {
    throw InvalidArgument("restore_checkpoint: build the model first (an InputLayer, or call it once)");
  }
  for (Variable& v : model_.weights()) v.place_on(device());  // as in save_checkpoint
  options_.optimizer->build(model_.trainable_weights());
  auto names_under = [&](const std::string& prefix) {
    std::vector<std::string> names;
    for (const std::string& name : file.order) {
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
    return names;
  };
  // Matched by position, not by name: automatic layer names ("dense_4") differ between processes.
  // Every shape is checked before anything is assigned, so a mismatch leaves the trainer as it was.
  const std::vector<Variable> model_variables = model_.weights(), optimizer_variables = options_.optimizer->variables();
  const std::vector<std::string> model_names = names_under("model/"), optimizer_names = names_under("optimizer/");
  for (const auto& [prefix, names, variables] : {std::tuple{"model/", &model_names, &model_variables},
                                                 std::tuple{"optimizer/", &optimizer_names, &optimizer_variables}}) {
    if (names->size() != variables->size()) {
      throw DataError(
          fmt::format("{}: {} tensors under '{}', the trainer has {}", path, names->size(), prefix, variables->size()),
          "the checkpoint was written for another model or optimizer");
    }
    for (size_t i = 0; i < names->size(); ++i) {
      const Tensor& saved = file.tensors.at((*names)[i]);
      const Variable& variable = (*variables)[i];
      if (saved.shape() != variable.shape() || saved.dtype() != variable.dtype()) {
        throw DataError(fmt::format("{}: '{}' is {} {}, but '{}' is {} {}", path, (*names)[i],
                                    dtype_name(saved.dtype()), saved.shape().to_string(), variable.name(),
                                    dtype_name(variable.dtype()), variable.shape().to_string()));
      }
    }
  }
  std::vector<std::shared_ptr<Metric>> metrics = {loss_mean_};
  metrics.insert(metrics.end(), metrics_.begin(), metrics_.end());
  std::vector<std::vector<std::vector<double>>> totals(metrics.size());
  for (const std::string& name : names_under("metrics/")) {
    size_t metric = 0;
    if (std::sscanf(name.c_str(), "metrics/%zu/", &metric) != 1 || metric >= metrics.size()) {
      throw DataError(
          fmt::format("{}: '{}' names no metric of this trainer ({} with the loss)", path, name, metrics.size()));
    }
    totals[metric].push_back(file.tensors.at(name).to_vector<double>());
  }
  for (size_t i = 0; i < model_variables.size(); ++i) {
    Variable variable = model_variables[i];
    variable.assign(file.tensors.at(model_names[i]));
  }
  for (size_t i = 0; i < optimizer_variables.size(); ++i) {
    Variable variable = optimizer_variables[i];
    variable.assign(file.tensors.at(optimizer_names[i]));
  }
  for (size_t m = 0; m < metrics.size(); ++m) metrics[m]->set_totals(std::move(totals[m]));
  // A checkpoint without a loss scale (a float32 run) leaves this trainer's as it starts.
  if (loss_scale_ && file.tensors.count("loss_scale/scale") != 0) {
    loss_scale_->restore(file.tensors.at("loss_scale/scale").item<double>(),
                         metadata_integer(file.metadata, "loss_scale_good_steps", path),
                         metadata_integer(file.metadata, "loss_scale_skipped_steps", path));
  }
  default_generator().set_state(static_cast<uint64_t>(metadata_integer(file.metadata, "rng_seed", path)),
                                static_cast<uint64_t>(metadata_integer(file.metadata, "rng_offset", path)));
  position_ = position;
  return position;
}

TrainingPosition verify_checkpoint(const std::string& path) {
  const SafetensorsFile file = read_safetensors(path);
  checked_tensors(file, path);
  return position_of(file.metadata, path);
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& folder, std::ostream& warnings) {
  struct Found {
    CheckpointInfo info;
    std::filesystem::file_time_type written;
  };
  std::vector<Found> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".safetensors") continue;
    const std::string path = entry.path().string();
    try {
      const std::map<std::string, std::string> metadata = read_safetensors_metadata(path);
      if (metadata.count("format") == 0 || metadata.at("format") != kFormat) continue;  // a saved model, say
      found.push_back({{path, position_of(metadata, path)}, entry.last_write_time()});
    } catch (const DataError& unreadable) {
      warnings << "nimbus: skipping checkpoint " << unreadable.message() << "\n";
    }
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    if (a.info.position.global_step != b.info.position.global_step) {
      return a.info.position.global_step > b.info.position.global_step;
    }
    return a.written > b.written;
  });
  std::vector<CheckpointInfo> checkpoints;
  checkpoints.reserve(found.size());
  for (Found& f : found) checkpoints.push_back(std::move(f.info));
  return checkpoints;
}

CheckpointInfo restore_latest_checkpoint(Trainer& trainer, const std::string& folder, std::ostream& warnings) {
  for (CheckpointInfo& checkpoint : list_checkpoints(folder, warnings)) {
    try {
      checkpoint.position = trainer.restore_checkpoint(checkpoint.path);
      return checkpoint;
    } catch (const DataError& refused) {
      warnings << "nimbus: refusing checkpoint " << refused.message()
               << (refused.hint().empty() ? "" : " (" + refused.hint() + ")") << "; trying the previous one\n";
    }
  }
  throw NotFound(fmt::format("{}: no intact training checkpoint to resume from", folder),
                 "start the run afresh without --resume");
}

}  // namespace nimbus::train
