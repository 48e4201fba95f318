// The GPU path's gradient buckets: each bucket's all-reduce is queued on the
// replica's communication stream as soon as backward has made its gradients,
// after the work the compute stream has queued so far (the kernels that made
// them), and the compute stream waits for it only where the sums are used.
// Nothing here names CUDA: on logical CPU devices (streams that run work at
// once, host collectives) the same code runs, and the tests compare it with one
// device. Internal to the library.
//
//   StreamOrderedBuckets buckets(collectives);        // one per replica
//   buckets.start(bucket, compute_stream);            // all_reduce_start's kernel
//   buckets.wait(bucket, sums, compute_stream, "step 12");   // all_reduce_wait's kernel
//
// A bucket is known by its first tensor's data (start and wait get the same tensors).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>

#include "device_collectives.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::distribute {

class StreamOrderedBuckets {
 public:
  explicit StreamOrderedBuckets(DeviceCollectives& collectives) : collectives_(collectives) {}

  // Queues the sum over the replicas of `bucket` (f32 tensors on the replica's device) on the
  // communication stream, ordered after everything queued on `compute` so far. Returns at once.
  void start(std::span<const Tensor> bucket, Stream& compute);
  // sums[i] <- bucket[i] summed over the replicas. The host waits for the bucket's all-reduce
  // (with the collective timeout); the copies into `sums` are queued on `compute`. A bucket
  // never started is all-reduced here.
  void wait(std::span<const Tensor> bucket, std::span<Tensor> sums, Stream& compute, const std::string& context);
  // Buckets started and not yet waited for.
  size_t in_flight() const { return in_flight_.size(); }

 private:
  struct Job {
    Tensor flat;               // the bucket laid end to end, summed in place
    std::vector<Tensor> keep;  // the gradients, alive until the communication stream has read them
    std::shared_ptr<Event> done;
  };
  DeviceCollectives& collectives_;
  std::map<const void*, Job> in_flight_;
};

}  // namespace nimbus::distribute
