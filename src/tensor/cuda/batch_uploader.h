// Host-to-device copies of input batches that overlap the training step:
// two pinned (page-locked) host buffers and two device buffers, used in turn.
// Batch N+1 is copied on the device's copy stream while the compute stream
// still runs step N; the compute stream waits for the copy (an event), not the host.
//
//   BatchUploader uploader(/*device=*/0);
//   Tensor x = uploader.upload(host_batch);   // on cuda:0; valid until the upload after next
//   run_step(x);                               // enqueued behind the copy
#pragma once

#include <array>
#include <memory>

#include "nimbus/tensor/batch_upload.h"
#include "nimbus/tensor/tensor.h"
#include "src/device/cuda/cuda_stream.h"

namespace nimbus::cuda {

// Page-locked host memory (cudaHostAlloc): the copy engine reads it directly, asynchronously.
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(size_t bytes);
  ~PinnedHostBuffer();
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The trainer's uploader for CUDA devices (nimbus/tensor/batch_upload.h): one per tensor of the batch.
class BatchUploader final : public BatchUpload {
 public:
  explicit BatchUploader(int device);
  // A device copy of `host` (a contiguous CPU tensor). Its memory is reused two uploads later.
  Tensor upload(const Tensor& host) override;

 private:
  struct Slot {
    std::unique_ptr<PinnedHostBuffer> staging;
    std::shared_ptr<Storage> device_buffer;
    std::shared_ptr<Event> copied;    // on the copy stream: the staging buffer may be refilled after it
    std::shared_ptr<Event> released;  // on the compute stream: the steps that read the device buffer are done
  };
  Slot& slot_for(size_t bytes);

  int device_;
  std::array<Slot, 2> slots_;
  size_t next_ = 0;
};

}  // namespace nimbus::cuda
