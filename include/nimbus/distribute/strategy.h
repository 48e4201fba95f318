// Distribution strategies (TensorFlow's tf.distribute): where the replicas of a
// training step run and how they talk.
//
//   set_logical_cpu_devices({{.threads = 1}, {.threads = 1}});
//   auto strategy = distribute::Mirrored({Device::cpu(0), Device::cpu(1)});
//   train::Trainer trainer = train::compile(model, {.optimizer = ..., .loss = ..., .strategy = strategy});
//   trainer.fit(x, y, {.batch_size = 64});   // 64 is the global batch: 32 per replica
//
// OneDevice: one replica, in the calling thread. Mirrored(devices): one replica
// per local device, each on its own thread: on logical CPU devices under the device's
// thread budget (logical_devices.h), meeting through in-process collectives; on GPUs
// (cuda:0, cuda:1, ...) all-reducing gradients through NCCL, each replica on its device's
// compute stream and a communication stream of its own.
// MultiWorkerMirrored: one replica per process of an MPI job (mpi_collectives.h).
//
// A replica's code finds its place with current_replica(); the train step uses
// it to take its share of the global batch and to all-reduce its gradients.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/device/device.h"
#include "nimbus/distribute/collectives.h"

namespace nimbus::distribute {

class CommunicationThread;   // internal: src/distribute/communication_thread.h
class DeviceCollectives;     // internal: src/distribute/device_collectives.h
class StreamOrderedBuckets;  // internal: src/distribute/stream_ordered_buckets.h

struct ReplicaContext {
  int replica_id = 0;    // over all workers: worker_rank * local replicas + local index
  int num_replicas = 1;  // replicas in sync, over all workers
  Device device;
  Collectives* collectives = nullptr;  // ranks are replica ids
  // Gradients are all-reduced in buckets of at most this many bytes (reverse layer order).
  size_t bucket_bytes = 25u << 20;
  // Runs the buckets' all-reduces beside the backward pass (runtime.strategy.overlap); nullptr: they run
  // after it, on the replica's thread.
  CommunicationThread* gradient_thread = nullptr;
  // The GPU path (always on GPUs; StrategyOptions::device_streams on CPU devices): the gradient
  // buckets' all-reduces queued on the replica's communication stream through these collectives
  // over device memory (NCCL on GPUs). nullptr: the host paths above.
  DeviceCollectives* device_collectives = nullptr;
  StreamOrderedBuckets* stream_buckets = nullptr;
};

// The replica the calling thread runs, inside Strategy::run; nullptr elsewhere.
const ReplicaContext* current_replica();

struct StrategyOptions {
  CollectiveOptions collectives{};
  // Gradient bucket size for the all-reduce (runtime.strategy.bucket_size).
  size_t bucket_bytes = 25u << 20;
  // Each bucket's all-reduce starts as soon as the backward pass has made its gradients, on a
  // communication thread per replica (runtime.strategy.overlap); false: all of them after backward.
  bool overlap = true;
  // Replicas on GPUs all-reduce through NCCL on a communication stream each (the GPU path). On CPU
  // devices, true runs that path's bucket and stream ordering over the in-process collectives
  // (streams that run work at once), which is how it is tested without a GPU.
  bool device_streams = false;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // "one_device", "mirrored" or "multi_worker_mirrored" (the config's runtime.strategy.type).
  virtual std::string name() const = 0;
  // The devices of this process's replicas, in local replica order.
  virtual std::vector<Device> devices() const = 0;
  int local_replicas() const { return static_cast<int>(devices().size()); }
  // Replicas over every worker (TensorFlow's num_replicas_in_sync).
  int num_replicas_in_sync() const { return local_replicas() * num_workers(); }
  virtual int worker_rank() const { return 0; }
  virtual int num_workers() const { return 1; }
  // Whether this process prints progress and writes the run's files (rank 0).
  bool is_chief() const { return worker_rank() == 0; }

  // Runs fn(local_replica) once for every local replica, each on its replica's thread with
  // current_replica() set, and returns when all are done. When a replica throws, the others'
  // collectives are aborted (nobody waits on it) and the first error is rethrown here.
  virtual void run(const std::function<void(int local_replica)>& fn) = 0;
  // Blocks until every worker's process reaches it (checkpoints, the end of a run).
  virtual void barrier() {}
};

std::shared_ptr<Strategy> OneDevice(Device device = Device::cpu());
// Replicas on these devices (CPU: logical devices that exist; see logical_devices.h).
std::shared_ptr<Strategy> Mirrored(const std::vector<Device>& devices, const StrategyOptions& options = {});

// The strategy of a config's runtime.strategy section ({type, devices, collective_timeout,
// bucket_size, overlap}); mirrored over CPU devices splits the CPU into that many logical devices with
// `threads` (the runtime's compute threads) shared evenly. `where` names the section in errors.
// On a GPU `training_device` (runtime.device: cuda) the replicas are GPUs: mirrored over those the
// section lists, else every GPU this process sees; multi_worker_mirrored on the GPU of each process's
// local rank. Both all-reduce through NCCL (Unavailable with the reason when it does not load).
std::shared_ptr<Strategy> strategy_from_config(const nlohmann::json& section, int threads, const std::string& where,
                                               Device training_device = Device::cpu());

}  // namespace nimbus::distribute
