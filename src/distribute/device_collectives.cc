#include "device_collectives.h"

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus::distribute {
namespace {

NcclFactories g_nccl;

void check_nccl_built() {
  if (g_nccl.local_group == nullptr) {
    throw Unavailable("replicas on GPUs all-reduce through NCCL, and this build has no CUDA backend",
                      "rebuild with -DNIMBUS_CUDA=ON");
  }
}

// CPU streams run work when it is queued: each call is the host collective itself.
class HostDeviceCollectives final : public DeviceCollectives {
 public:
  HostDeviceCollectives(Collectives& collectives, Device device)
      : collectives_(collectives), stream_(backend(device.type).default_stream(device.index)) {}
  int rank() const override { return collectives_.rank(); }
  int size() const override { return collectives_.size(); }
  Stream& stream() override { return stream_; }
  void all_reduce_sum(float* data, size_t count, Stream&) override {
    collectives_.all_reduce({data, count}, ReduceOp::kSum);
  }
  void broadcast(void* data, size_t bytes, int root, Stream&) override {
    collectives_.broadcast({static_cast<std::byte*>(data), bytes}, root);
  }
  // The collective ran inside the call (and timed out there, if it did).
  void wait_for(const Event& done, const std::string&) override { done.synchronize(); }
  // The strategy aborts the host group itself.
  void abort(const std::string&) override {}

 private:
  Collectives& collectives_;
  Stream& stream_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> host_device_collectives(Collectives& collectives, Device device) {
  NIMBUS_ASSERT(device.is_cpu()) << "host collectives serve CPU devices, not " << device.to_string();
  return std::make_unique<HostDeviceCollectives>(collectives, device);
}

std::vector<std::unique_ptr<DeviceCollectives>> nccl_local_group(const std::vector<Device>& devices,
                                                                 const CollectiveOptions& options) {
  check_nccl_built();
  return g_nccl.local_group(devices, options);
}

std::unique_ptr<DeviceCollectives> nccl_world_member(Collectives& host, Device device,
                                                     const CollectiveOptions& options) {
  check_nccl_built();
  return g_nccl.world_member(host, device, options);
}

void set_nccl_factories(NcclFactories factories) { g_nccl = factories; }

}  // namespace nimbus::distribute
