// fit's batches on the trainer's device, fetched one batch ahead (TensorFlow's prefetch_to_device):
// taken from a BatchSource and copied through the device's BatchUpload. fit launches step N,
// then calls fetch_ahead(), so that batch N+1 is produced on the host and copied (CUDA: staged in
// pinned memory, copied on the copy stream) while the device still runs step N, and only then reads
// step N's loss, which waits for the step. On the host's CPU nothing is uploaded: batches are
// fetched when the step needs them and fetch_ahead() does nothing.
//
//   DeviceBatches batches(source, trainer.device(), /*look_ahead=*/true, trainer.profiler());
//   batches.begin_epoch(epoch, seed, first_step);
//   while (std::optional<DeviceBatches::Batch> batch = batches.next()) {
//     outputs = launch_step(batch->x, batch->y);   // enqueued on the device; the host goes on
//     if (another step follows in this epoch) batches.fetch_ahead();
//     read(outputs); run the callbacks;            // they see step N before step N+1 is launched
//   }
//
// The look-ahead never crosses an epoch's end: validation and the epoch-end callbacks run first,
// then the next epoch's first batch is fetched, as without it. A batch fetched ahead that no step
// takes (a callback stopped training, an interrupt) is dropped; what a checkpoint records of the
// source is Batch::position, taken before the look-ahead. What fetching ahead throws (a bad record,
// an upload that does not fit) is thrown by the next() that would have returned that batch, so step
// N's outputs and callbacks come first, as without the look-ahead.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "batch_source.h"
#include "nimbus/monitor/step_profiler.h"
#include "nimbus/tensor/batch_upload.h"

namespace nimbus::train {

class DeviceBatches {
 public:
  struct Batch {
    Tensor x, y;           // on the device; valid until the upload after next (BatchUpload)
    std::string position;  // the source's position after this batch (TrainingPosition::input_iterator)
  };

  // Uploads through make_batch_upload(device) unless device is the host's CPU; `look_ahead` lets
  // fetch_ahead() fetch (where batches are uploaded).
  DeviceBatches(BatchSource& source, Device device, bool look_ahead, monitor::StepProfiler& profiler);

  // Starts epoch `epoch` of the source (a batch fetched ahead and not taken is dropped).
  void begin_epoch(int epoch, uint64_t seed, int64_t first_step);
  // The epoch's next batch: the one fetched ahead, else fetched now; nullopt at the epoch's end.
  std::optional<Batch> next();
  // Fetches and uploads the batch after the one next() returned last, for the next call to next().
  // Call it after launching the step that reads the current batch, when another step follows in
  // the epoch.
  void fetch_ahead();

 private:
  // Production (the input_wait span) and upload (host_to_device).
  std::optional<Batch> fetch();

  BatchSource& source_;
  monitor::StepProfiler& profiler_;
  std::unique_ptr<BatchUpload> x_upload_, y_upload_;  // one per tensor of the batch: each keeps two slots
  bool look_ahead_;
  // What fetch_ahead() got: a batch, or nullopt (the epoch's end); or what it threw.
  std::optional<std::optional<Batch>> ahead_;
  std::exception_ptr ahead_error_;
};

}  // namespace nimbus::train
