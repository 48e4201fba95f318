#include "stream_ordered_buckets.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus::distribute {

void StreamOrderedBuckets::start(std::span<const Tensor> bucket, Stream& compute) {
  NIMBUS_ASSERT(!bucket.empty()) << "an empty gradient bucket";
  const Device device = bucket[0].device();
  int64_t count = 0;
  for (const Tensor& tensor : bucket) count += tensor.numel();
  Job job{.flat = Tensor::empty(Shape{count}, DType::kF32, device)};
  // After the kernels that made the gradients, and those that last used the flat buffer's memory
  // (the allocator serves the compute stream's order).
  Stream& communication = collectives_.stream();
  communication.wait(*compute.record());
  Backend& memory = backend(device.type);
  auto* flat = static_cast<float*>(job.flat.raw_data());  // device memory: no host access
  for (const Tensor& tensor : bucket) {
    memory.copy(tensor.raw_data(), device, flat, device, tensor.nbytes(), communication);
    flat += tensor.numel();
    job.keep.push_back(tensor);
  }
  collectives_.all_reduce_sum(static_cast<float*>(job.flat.raw_data()), static_cast<size_t>(count), communication);
  job.done = communication.record();
  const bool added = in_flight_.emplace(bucket[0].raw_data(), std::move(job)).second;
  NIMBUS_ASSERT(added) << "a gradient bucket was started twice without a wait";
}

void StreamOrderedBuckets::wait(std::span<const Tensor> bucket, std::span<Tensor> sums, Stream& compute,
                                const std::string& context) {
  auto found = in_flight_.find(bucket[0].raw_data());
  if (found == in_flight_.end()) {
    start(bucket, compute);
    found = in_flight_.find(bucket[0].raw_data());
  }
  const Job job = std::move(found->second);
  in_flight_.erase(found);
  // The host waits here (with the deadline) so that a replica that never arrives is an error,
  // not a hang in the next read of the loss; the compute stream then orders its copies after it.
  collectives_.wait_for(*job.done, context);
  compute.wait(*job.done);
  Backend& memory = backend(job.flat.device().type);
  const auto* flat = static_cast<float*>(job.flat.raw_data());  // device memory: no host access
  for (size_t i = 0; i < sums.size(); ++i) {
    memory.copy(flat, job.flat.device(), sums[i].raw_data(), sums[i].device(), sums[i].nbytes(), compute);
    flat += sums[i].numel();
  }
}

}  // namespace nimbus::distribute
