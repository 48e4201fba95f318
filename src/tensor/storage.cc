#include "nimbus/tensor/storage.h"

#include "nimbus/device/host_memory.h"

namespace nimbus {

Storage::Storage(Device device, size_t bytes)
    : device_(device), bytes_(bytes), allocator_(&allocator_for_new_tensor(device)) {
  data_ = allocator_->allocate(bytes);
}

Storage::Storage(Device device, void* data, size_t bytes, std::function<void()> release)
    : device_(device), data_(data), bytes_(bytes), release_(std::move(release)) {}

Storage::~Storage() {
  if (allocator_ != nullptr) {
    allocator_->deallocate(data_, bytes_);
  } else if (release_) {
    release_();
  }
}

}  // namespace nimbus
