#include "src/tensor/cuda/batch_uploader.h"

#include <algorithm>
#include <cstring>

#include "nimbus/device/backend.h"
#include "src/device/cuda/cuda_backend.h"
#include "src/device/cuda/cuda_check.h"

namespace nimbus::cuda {

PinnedHostBuffer::PinnedHostBuffer(size_t bytes) : bytes_(bytes) {
  NIMBUS_CUDA_CHECK(cudaHostAlloc(&data_, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
}

PinnedHostBuffer::~PinnedHostBuffer() { (void)cudaFreeHost(data_); }

BatchUploader::BatchUploader(int device) : device_(device) {}

namespace {

// A device buffer the copy stream writes first and the compute stream's kernels read last: allocated on
// the copy stream (which then waits for the compute stream's earlier frees on the device) and freed on the
// compute stream, so neither the allocation nor the free makes the host wait.
std::shared_ptr<Storage> copy_target(int device, size_t bytes) {
  BfcAllocator& allocator = device_allocator(device);
  Stream& compute = default_stream_for(Device::cuda(device));
  void* data = allocator.allocate(bytes, copy_stream(device));
  return std::make_shared<Storage>(Device::cuda(device), data, bytes, [&allocator, &compute, data, bytes] {
    allocator.deallocate_on(data, bytes, compute);
  });
}

}  // namespace

BatchUploader::Slot& BatchUploader::slot_for(size_t bytes) {
  Slot& slot = slots_[next_];
  next_ = 1 - next_;
  if (slot.copied != nullptr) slot.copied->synchronize();  // its staging buffer is about to be overwritten
  if (slot.staging == nullptr || slot.staging->bytes() < bytes) {
    // A larger batch: new buffers. The old device buffer goes back on the compute stream, after the
    // kernels that read it, without the host waiting for them.
    slot.staging = std::make_unique<PinnedHostBuffer>(bytes);
    slot.device_buffer = copy_target(device_, bytes);
    slot.released = nullptr;
  }
  return slot;
}

Tensor BatchUploader::upload(const Tensor& host) {
  NIMBUS_ASSERT(host.device().is_cpu()) << "upload takes a host tensor, got one on " << host.device().to_string();
  CudaStream& compute = cuda_stream(default_stream_for(Device::cuda(device_)));
  CudaStream& copy = copy_stream(device_);
  Slot& slot = slot_for(host.nbytes());
  Slot& other = slots_[next_];
  std::memcpy(slot.staging->data(), host.raw_data(), host.nbytes());
  // The device buffer is overwritten only after the steps that read its last batch.
  if (slot.released != nullptr) copy.wait(*slot.released);
  NIMBUS_CUDA_CHECK(cudaSetDevice(device_));
  NIMBUS_CUDA_CHECK(cudaMemcpyAsync(slot.device_buffer->data(), slot.staging->data(), host.nbytes(),
                                    cudaMemcpyHostToDevice, copy.handle()));
  slot.copied = copy.record();
  compute.wait(*slot.copied);
  // Everything that read the other slot's batch is enqueued by now: reuse it after this point.
  other.released = compute.record();
  return Tensor::view(slot.device_buffer, 0, host.shape(), host.dtype());
}

namespace {
const bool kRegistered =
    (register_batch_upload(DeviceType::kCUDA, [](int device) { return std::make_unique<BatchUploader>(device); }),
     true);
}  // namespace

}  // namespace nimbus::cuda
