#include "device_batches.h"

#include <utility>

#include "nimbus/device/host_memory.h"

namespace nimbus::train {

DeviceBatches::DeviceBatches(BatchSource& source, Device device, bool look_ahead, monitor::StepProfiler& profiler)
    : source_(source), profiler_(profiler) {
  if (device != Device::cpu()) {
    x_upload_ = make_batch_upload(device);
    y_upload_ = make_batch_upload(device);
  }
  // On the host's CPU a step runs before its launch returns: there is nothing to overlap.
  look_ahead_ = look_ahead && x_upload_ != nullptr;
}

void DeviceBatches::begin_epoch(int epoch, uint64_t seed, int64_t first_step) {
  ahead_.reset();
  ahead_error_ = nullptr;
  source_.begin_epoch(epoch, seed, first_step);
}

std::optional<DeviceBatches::Batch> DeviceBatches::fetch() {
  std::optional<Batch> batch;
  {
    auto span = profiler_.span(monitor::Span::kInputWait);
    // A batch made on the host for another device is host pipeline memory; on the host's CPU it is the
    // step's input, device memory (the estimate's inputs).
    std::optional<HostMemoryScope> host_memory;
    if (x_upload_) host_memory.emplace();
    std::optional<std::pair<Tensor, Tensor>> host = source_.next();
    if (!host) return std::nullopt;
    batch = Batch{std::move(host->first), std::move(host->second), source_.position()};
  }
  if (x_upload_) {
    auto span = profiler_.span(monitor::Span::kHostToDevice);
    batch->x = x_upload_->upload(batch->x);
    batch->y = y_upload_->upload(batch->y);
  }
  return batch;
}

std::optional<DeviceBatches::Batch> DeviceBatches::next() {
  if (ahead_error_) std::rethrow_exception(std::exchange(ahead_error_, nullptr));
  if (!ahead_) return fetch();
  std::optional<Batch> batch = std::move(*ahead_);
  ahead_.reset();
  return batch;
}

void DeviceBatches::fetch_ahead() {
  if (!look_ahead_ || ahead_ || ahead_error_) return;
  // Kept for next(), not thrown here: without the look-ahead the error would come after step N's callbacks.
  try {
    ahead_.emplace(fetch());
  } catch (...) {
    ahead_error_ = std::current_exception();
  }
}

}  // namespace nimbus::train
