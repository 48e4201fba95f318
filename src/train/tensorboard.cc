#include "nimbus/train/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>

#include "nimbus/base/error.h"
#include "wall_clock.h"

namespace nimbus::train {

namespace {

// A protocol-buffer message written field by field (the wire format, for the few types used here).
class ProtoWriter {
 public:
  void varint_field(int field, uint64_t value) {
    key(field, 0);
    varint(value);
  }
  void double_field(int field, double value) {
    key(field, 1);
    little_endian(value);
  }
  void float_field(int field, float value) {
    key(field, 5);
    little_endian(value);
  }
  void bytes_field(int field, const std::string& value) {
    key(field, 2);
    varint(value.size());
    bytes_ += value;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void key(int field, int wire_type) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type)); }
  void varint(uint64_t value) {
    while (value >= 0x80) {
      bytes_ += static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    bytes_ += static_cast<char>(value);
  }
  template <typename T>
  void little_endian(T value) {  // the host is little-endian (x86-64, aarch64), as the wire format is
    std::array<char, sizeof(T)> raw;
    std::memcpy(raw.data(), &value, sizeof(T));
    bytes_.append(raw.data(), raw.size());
  }
  std::string bytes_;
};

std::string event_file_path(const std::string& log_dir) {
  std::filesystem::create_directories(log_dir);
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) std::strcpy(host.data(), "localhost");
  const auto seconds = static_cast<int64_t>(unix_seconds());
  std::string path = fmt::format("{}/events.out.tfevents.{}.{}", log_dir, seconds, host.data());
  if (std::filesystem::exists(path)) path += fmt::format(".{}", getpid());
  return path;
}

}  // namespace

std::string file_version_event(double wall_time) {
  ProtoWriter event;
  event.double_field(1, wall_time);
  event.bytes_field(3, "brain.Event:2");
  return event.bytes();
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  ProtoWriter summary_value, summary, event;
  summary_value.bytes_field(1, tag);
  summary_value.float_field(2, value);
  summary.bytes_field(1, summary_value.bytes());
  event.double_field(1, wall_time);
  event.varint_field(2, static_cast<uint64_t>(step));
  event.bytes_field(5, summary.bytes());
  return event.bytes();
}

EventFileWriter::EventFileWriter(const std::string& log_dir) : path_(event_file_path(log_dir)), records_(path_) {
  records_.write(file_version_event(unix_seconds()));
  records_.flush();
}

void EventFileWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  records_.write(scalar_event(unix_seconds(), step, tag, static_cast<float>(value)));
}

namespace {

class TensorBoardCallback : public Callback {
 public:
  explicit TensorBoardCallback(TensorBoardOptions options) : options_(std::move(options)) {
    if (options_.update_freq < 0) {
      throw InvalidArgument(fmt::format("TensorBoard: update_freq must be >= 0, got {}", options_.update_freq));
    }
  }
  void on_train_begin(Trainer&) override {
    train_ = std::make_unique<EventFileWriter>(options_.log_dir + "/train");
    validation_.reset();  // made at the first epoch with validation logs
  }
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs& logs) override {
    const int64_t step = trainer.position().global_step;
    if (options_.update_freq == 0 || step % options_.update_freq != 0) return;
    for (const auto& [name, value] : logs) train_->add_scalar("batch_" + name, value, step);
    train_->flush();
  }
  void on_epoch_end(Trainer&, int epoch, const Logs& logs) override {
    for (const auto& [name, value] : logs) {
      if (name.rfind("val_", 0) == 0) {
        if (!validation_) validation_ = std::make_unique<EventFileWriter>(options_.log_dir + "/validation");
        validation_->add_scalar("epoch_" + name.substr(4), value, epoch - 1);
      } else {
        train_->add_scalar("epoch_" + name, value, epoch - 1);
      }
    }
    train_->flush();
    if (validation_) validation_->flush();
  }
  void on_train_end(Trainer&) override {
    for (auto* writer : {&train_, &validation_}) {
      if (*writer) (*writer)->close();
      writer->reset();
    }
  }

 private:
  TensorBoardOptions options_;
  std::unique_ptr<EventFileWriter> train_, validation_;
};

}  // namespace

std::shared_ptr<Callback> TensorBoard(const TensorBoardOptions& options) {
  return std::make_shared<TensorBoardCallback>(options);
}

}  // namespace nimbus::train
