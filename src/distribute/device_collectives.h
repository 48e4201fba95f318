// A replica's collectives over its device's memory, ordered by streams: what the
// GPU path all-reduces gradients through (NCCL, src/distribute/cuda/), and its
// stand-in over host collectives for CPU devices. Internal to the library.
//
//   DeviceCollectives& c = *replica->device_collectives;
//   c.all_reduce_sum(flat.data<float>(), n, c.stream());   // queued on the communication stream
//   c.wait_for(*c.stream().record(), "step 12");            // the host waits, with the collective timeout
//
// GPU: each call is queued on `stream` and returns at once; wait_for polls the event and
// NCCL's asynchronous error against the deadline and aborts the communicator when it
// passes (CollectiveTimeout, as MPI's). CPU: streams run work at once, so each call
// completes inside it (through the in-process or MPI collectives).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nimbus/device/stream.h"
#include "nimbus/distribute/collectives.h"

namespace nimbus::distribute {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The communication stream the collectives run on (its own CUDA stream per replica on a GPU).
  virtual Stream& stream() = 0;
  // data[0, count) <- the sum over the ranks, queued on `stream`.
  virtual void all_reduce_sum(float* data, size_t count, Stream& stream) = 0;
  // data[0, bytes) <- root's, queued on `stream`.
  virtual void broadcast(void* data, size_t bytes, int root, Stream& stream) = 0;
  // Returns once `done` has happened; CollectiveTimeout (and the group aborted) when it does not
  // within the collective timeout, or when a peer failed. `context` is the step, for the message.
  virtual void wait_for(const Event& done, const std::string& context) = 0;
  // A replica failed: pending and later calls fail with `reason` instead of waiting for it.
  virtual void abort(const std::string& reason) = 0;
};

// The stand-in over host collectives (an InProcessGroup member or an MPI communicator) for a
// replica on the CPU device `device`: it runs the GPU path's ordering where streams run at once.
std::unique_ptr<DeviceCollectives> host_device_collectives(Collectives& collectives, Device device);

// The NCCL communicators of one process's replicas on `devices` (GPUs; ncclCommInitAll), in
// replica order. Unavailable when this build has no CUDA backend or NCCL does not load.
std::vector<std::unique_ptr<DeviceCollectives>> nccl_local_group(const std::vector<Device>& devices,
                                                                 const CollectiveOptions& options);

// This process's NCCL end of a communicator over every rank of `host` (an MPI job's world): rank 0
// makes the unique id, `host` broadcasts it, and each rank joins on `device` (ncclCommInitRank).
std::unique_ptr<DeviceCollectives> nccl_world_member(Collectives& host, Device device,
                                                     const CollectiveOptions& options);

// Provided by src/distribute/cuda/ (this layer's folder that builds with the CUDA backend).
struct NcclFactories {
  std::vector<std::unique_ptr<DeviceCollectives>> (*local_group)(const std::vector<Device>&,
                                                                 const CollectiveOptions&) = nullptr;
  std::unique_ptr<DeviceCollectives> (*world_member)(Collectives&, Device, const CollectiveOptions&) = nullptr;
};
void set_nccl_factories(NcclFactories factories);

}  // namespace nimbus::distribute
