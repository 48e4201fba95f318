// TensorBoard event files, so that `tensorboard --logdir DIR` shows the training curves.
//
//   trainer.fit(x, y, {.epochs = 5, .validation_data = {{x_val, y_val}},
//                      .callbacks = {train::TensorBoard({.log_dir = "logs"})}});
//   // logs/train/events.out.tfevents.<seconds>.<host>       epoch_loss, epoch_accuracy, ...
//   // logs/validation/events.out.tfevents.<seconds>.<host>  epoch_loss, epoch_accuracy (of val_*)
//
// The format is TensorFlow's: a TFRecord stream (data/tfrecord.h) of `Event` protocol buffers
// (tensorflow/core/util/event.proto). The first event carries file_version "brain.Event:2"; each
// scalar is an Event{wall_time, step, summary: Summary{value: [Value{tag, simple_value}]}}:
//
//   Event:   wall_time double = 1 (fixed64), step int64 = 2 (varint), file_version string = 3,
//            summary Summary = 5 (length-delimited)
//   Summary: value Value = 1 (repeated)
//   Value:   tag string = 1, simple_value float = 2 (fixed32)
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nimbus/data/tfrecord.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {

// The serialized Event protocol buffers.
std::string file_version_event(double wall_time);
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);

// One event file: log_dir/events.out.tfevents.<seconds>.<host> (the folder is created; a name
// taken already gets the process id appended), opened with its file_version event.
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& log_dir);
  void add_scalar(const std::string& tag, double value, int64_t step);
  void flush() { records_.flush(); }
  // Finishes the file; write errors surface here.
  void close() { records_.close(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  data::TFRecordWriter records_;
};

struct TensorBoardOptions {
  std::string log_dir = "logs";
  // 0: scalars at each epoch's end ("epoch_loss", ... at step = epoch - 1, as Keras's
  // update_freq="epoch"); N > 0: also "batch_loss", ... every N steps, at the global step.
  int64_t update_freq = 0;
};
// Keras's TensorBoard callback (scalars only): training logs under log_dir/train, the val_*
// logs (without the prefix) under log_dir/validation.
std::shared_ptr<Callback> TensorBoard(const TensorBoardOptions& options = {});

}  // namespace nimbus::train
