// DeviceCollectives over NCCL (src/distribute/device_collectives.h): a replica's
// communicator and its communication stream; local groups with ncclCommInitAll, a
// job's world with rank 0's unique id broadcast over the host collectives (MPI).
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <span>
#include <thread>

#include "nimbus/base/error.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/nccl_library.h"
#include "src/distribute/collective_timeout.h"
#include "src/distribute/device_collectives.h"

namespace nimbus::distribute {
namespace {

using cuda::NcclComm;

// One rank's communicator and the stream its collectives run on.
class NcclDeviceCollectives final : public DeviceCollectives {
 public:
  NcclDeviceCollectives(NcclComm comm, int rank, int size, Device device, CollectiveOptions options)
      : comm_(comm), rank_(rank), size_(size), stream_(device.index), options_(options) {}

  ~NcclDeviceCollectives() override {
    // An aborted communicator is gone already; destroying waits for its pending work.
    if (!aborted_) (void)cuda::nccl().ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Stream& stream() override { return stream_; }

  void all_reduce_sum(float* data, size_t count, Stream& stream) override {
    check_not_aborted();
    NIMBUS_NCCL_CHECK(cuda::nccl().ncclAllReduce(data, data, count, cuda::kNcclFloat32, cuda::kNcclSum, comm_,
                                                 cuda::cuda_stream(stream).handle()),
                      comm_);
  }

  void broadcast(void* data, size_t bytes, int root, Stream& stream) override {
    check_not_aborted();
    NIMBUS_NCCL_CHECK(cuda::nccl().ncclBroadcast(data, data, bytes, cuda::kNcclUint8, root, comm_,
                                                 cuda::cuda_stream(stream).handle()),
                      comm_);
  }

  // NCCL's kernels spin until every rank has arrived: a peer that died leaves them spinning. The host
  // polls the event, NCCL's asynchronous error and the deadline, and aborts the communicator (which
  // ends its kernels) when one fails, as MPI's collectives do after their timeout.
  void wait_for(const Event& done, const std::string& context) override {
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
      if (done.query()) return;
      check_not_aborted();
      cuda::NcclResult error = cuda::kNcclSuccess;
      NIMBUS_NCCL_CHECK(cuda::nccl().ncclCommGetAsyncError(comm_, &error), comm_);
      if (error != cuda::kNcclSuccess && error != cuda::kNcclInProgress) {
        const std::string what = cuda::nccl().ncclGetErrorString(error);
        abort_communicator();
        throw CollectiveTimeout(
            fmt::format("NCCL all_reduce failed on rank {} of {} at {}: {}", rank_, size_, context, what),
            "set NCCL_DEBUG=WARN for NCCL's account of it; the other ranks stop too");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort_communicator();
        // NCCL does not say which peer is missing.
        throw collective_timeout("NCCL all_reduce", rank_, size_, {}, options_.timeout, context);
      }
      std::this_thread::sleep_for(pause);
    }
  }

  void abort(const std::string& reason) override {
    std::lock_guard lock(mutex_);
    if (abort_reason_.empty()) abort_reason_ = reason;
  }

 private:
  void check_not_aborted() {
    std::string reason;
    {
      std::lock_guard lock(mutex_);
      reason = abort_reason_;
    }
    if (reason.empty()) return;
    abort_communicator();
    throw CollectiveTimeout(fmt::format("NCCL collectives of rank {} were aborted: {}", rank_, reason));
  }

  void abort_communicator() {
    if (!aborted_.exchange(true)) (void)cuda::nccl().ncclCommAbort(comm_);
  }

  NcclComm comm_;
  int rank_, size_;
  cuda::CudaStream stream_;
  CollectiveOptions options_;
  std::mutex mutex_;
  std::string abort_reason_;
  std::atomic<bool> aborted_{false};
};

std::vector<std::unique_ptr<DeviceCollectives>> make_nccl_local_group(const std::vector<Device>& devices,
                                                                      const CollectiveOptions& options) {
  const cuda::NcclApi& api = cuda::nccl();
  std::vector<int> indices;
  for (const Device device : devices) {
    NIMBUS_ASSERT(device.type == DeviceType::kCUDA) << "NCCL serves GPUs, not " << device.to_string();
    indices.push_back(device.index);
  }
  std::vector<NcclComm> comms(devices.size(), nullptr);
  NIMBUS_NCCL_CHECK(api.ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), indices.data()), nullptr);
  std::vector<std::unique_ptr<DeviceCollectives>> ends;
  const int size = static_cast<int>(devices.size());
  for (int r = 0; r < size; ++r) {
    ends.push_back(std::make_unique<NcclDeviceCollectives>(comms[static_cast<size_t>(r)], r, size,
                                                           devices[static_cast<size_t>(r)], options));
  }
  return ends;
}

// A fresh id for a communicator that spans processes (rank 0 makes it).
cuda::NcclUniqueId nccl_unique_id() {
  cuda::NcclUniqueId id{};
  NIMBUS_NCCL_CHECK(cuda::nccl().ncclGetUniqueId(&id), nullptr);
  return id;
}

// This process's end of communicator `id`, as rank `rank` of `size` on `device`.
std::unique_ptr<DeviceCollectives> nccl_rank(const cuda::NcclUniqueId& id, int rank, int size, Device device,
                                             const CollectiveOptions& options) {
  NIMBUS_CUDA_CHECK(cudaSetDevice(device.index));
  NcclComm comm = nullptr;
  NIMBUS_NCCL_CHECK(cuda::nccl().ncclCommInitRank(&comm, size, id, rank), nullptr);
  return std::make_unique<NcclDeviceCollectives>(comm, rank, size, device, options);
}

std::unique_ptr<DeviceCollectives> make_nccl_world_member(Collectives& host, Device device,
                                                          const CollectiveOptions& options) {
  cuda::NcclUniqueId id{};
  if (host.rank() == 0) id = nccl_unique_id();
  host.broadcast(std::as_writable_bytes(std::span(id.internal)), 0);
  return nccl_rank(id, host.rank(), host.size(), device, options);
}

const bool kNcclFactoriesProvided =
    (set_nccl_factories({.local_group = make_nccl_local_group, .world_member = make_nccl_world_member}), true);

}  // namespace

}  // namespace nimbus::distribute
