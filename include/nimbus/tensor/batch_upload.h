// Input batches from the host to the device a training loop runs on. The
// default is a plain copy (Tensor::to); a backend may register a better one:
// CUDA stages batches in pinned memory, double-buffered, on its copy stream
// (src/tensor/cuda/batch_uploader.h).
//
//   std::unique_ptr<BatchUpload> upload = make_batch_upload(Device::cuda());
//   Tensor x = upload->upload(host_batch);   // valid until the upload after next
#pragma once

#include <functional>
#include <memory>

#include "nimbus/device/device.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

class BatchUpload {
 public:
  virtual ~BatchUpload() = default;
  // A copy of `host` (a CPU tensor) on the device; its memory may be reused two uploads later. Enqueue the
  // work that reads it before the next upload (fit launches step N, then uploads batch N+1): the upload
  // after next overwrites it only behind the work enqueued by then, on the device, without the host waiting.
  virtual Tensor upload(const Tensor& host) = 0;
};

using BatchUploadFactory = std::function<std::unique_ptr<BatchUpload>(int device_index)>;
// Registers the uploader of a device type (a backend does, at library load).
void register_batch_upload(DeviceType type, BatchUploadFactory factory);
// An uploader for batches bound for `device`: the registered one, else plain copies.
std::unique_ptr<BatchUpload> make_batch_upload(Device device);

}  // namespace nimbus
