#include "nimbus/tensor/batch_upload.h"

#include <map>
#include <mutex>

namespace nimbus {
namespace {

class CopyUpload final : public BatchUpload {
 public:
  explicit CopyUpload(Device device) : device_(device) {}
  Tensor upload(const Tensor& host) override { return host.to(device_); }

 private:
  Device device_;
};

struct Factories {
  std::mutex mutex;
  std::map<DeviceType, BatchUploadFactory> by_type;
};
Factories& factories() {
  static Factories f;
  return f;
}

}  // namespace

void register_batch_upload(DeviceType type, BatchUploadFactory factory) {
  Factories& f = factories();
  std::lock_guard lock(f.mutex);
  f.by_type[type] = std::move(factory);
}

std::unique_ptr<BatchUpload> make_batch_upload(Device device) {
  Factories& f = factories();
  std::lock_guard lock(f.mutex);
  const auto found = f.by_type.find(device.type);
  if (found == f.by_type.end()) return std::make_unique<CopyUpload>(device);
  return found->second(device.index);
}

}  // namespace nimbus
