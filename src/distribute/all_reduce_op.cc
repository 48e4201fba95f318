// The all_reduce op: its kernel hands the replica's buffers to the replica's
// collectives (strategy.h's current_replica), so the same traced step runs on
// every replica's thread or process. On GPUs (and on CPU devices with
// StrategyOptions::device_streams) the buckets go through the replica's
// stream-ordered buckets instead (stream_ordered_buckets.h).
#include <fmt/format.h>

#include <cstring>

#include "communication_thread.h"
#include "nimbus/device/backend.h"
#include "nimbus/distribute/all_reduce.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "stream_ordered_buckets.h"

namespace nimbus::distribute {
namespace {

const OpSchema& kAllReduce = define_op({
    .name = "all_reduce",
    .summary = "each input summed over the replicas in sync, one collective for all (identity outside a replica)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kKeepInputs,  // sums the replicas' float32 gradients as they are
    .num_inputs = 1,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          std::vector<TensorSpec> outputs;
          for (size_t i = 0; i < ctx.inputs.size(); ++i) {
            ctx.expect_dtype(static_cast<int>(i), {DType::kF32});
            outputs.push_back(ctx.inputs[i]);
          }
          return outputs;
        },
    .differentiable = false,
    // Not has_side_effects (which means "writes input 0"): it writes only its outputs. Passes keep
    // the program order, so every replica runs its collectives in the same order.
});

// The tensors laid end to end: one collective for the bucket.
std::vector<float> flatten(std::span<const Tensor> tensors) {
  size_t count = 0;
  for (const Tensor& tensor : tensors) count += static_cast<size_t>(tensor.numel());
  std::vector<float> flat(count);
  size_t offset = 0;
  for (const Tensor& tensor : tensors) {
    std::memcpy(flat.data() + offset, tensor.data<float>(), tensor.nbytes());
    offset += static_cast<size_t>(tensor.numel());
  }
  return flat;
}

void unflatten(const std::vector<float>& flat, std::span<Tensor> tensors) {
  size_t offset = 0;
  for (Tensor& tensor : tensors) {
    std::memcpy(tensor.data<float>(), flat.data() + offset, tensor.nbytes());
    offset += static_cast<size_t>(tensor.numel());
  }
}

bool in_sync(const ReplicaContext* replica) { return replica != nullptr && replica->num_replicas > 1; }

// The GPU path (device_collectives.h): the replica's buckets go through its communication stream.
// It serves a single replica too, so that one GPU runs the path a pod of them runs.
StreamOrderedBuckets* stream_buckets() {
  const ReplicaContext* replica = current_replica();
  return replica != nullptr ? replica->stream_buckets : nullptr;
}

const std::string& step_context() { return current_replica()->collectives->context(); }

void all_reduce_kernel(KernelContext& ctx) {
  if (StreamOrderedBuckets* buckets = stream_buckets()) {
    buckets->wait(ctx.inputs, ctx.outputs, ctx.stream, step_context());  // starts it first
    return;
  }
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.outputs[i].copy_from(ctx.inputs[i]);
  const ReplicaContext* replica = current_replica();
  if (!in_sync(replica)) return;
  if (ctx.outputs.size() == 1) {
    replica->collectives->all_reduce({ctx.outputs[0].data<float>(), static_cast<size_t>(ctx.outputs[0].numel())},
                                     ReduceOp::kSum);
    return;
  }
  std::vector<float> flat = flatten(ctx.outputs);
  replica->collectives->all_reduce(flat, ReduceOp::kSum);
  unflatten(flat, ctx.outputs);
}

const bool kAllReduceReference =
    register_kernel("all_reduce", {.name = kReferenceKernel, .dtypes = {DType::kF32}, .fn = all_reduce_kernel});

const OpSchema& kAllReduceStart = define_op({
    .name = "all_reduce_start",
    .summary = "hands its inputs (one gradient bucket) to the replica's communication thread to be summed over the "
               "replicas; returns the ticket all_reduce_wait takes (-1: nothing started)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kKeepInputs,  // the same, in two halves (overlap)
    .num_inputs = 1,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.expect_dtype(static_cast<int>(i), {DType::kF32});
          return std::vector<TensorSpec>{{Shape{}, DType::kI64}};
        },
    .differentiable = false,
});

const OpSchema& kAllReduceWait = define_op({
    .name = "all_reduce_wait",
    .summary = "inputs 1.. summed over the replicas by the all-reduce that all_reduce_start (input 0, its ticket) "
               "started; the identity outside a replica",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kKeepInputs,
    .num_inputs = 2,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_dtype(0, {DType::kI64});
          std::vector<TensorSpec> outputs;
          for (size_t i = 1; i < ctx.inputs.size(); ++i) {
            ctx.expect_dtype(static_cast<int>(i), {DType::kF32});
            outputs.push_back(ctx.inputs[i]);
          }
          return outputs;
        },
    .differentiable = false,
});

void all_reduce_start_kernel(KernelContext& ctx) {
  if (StreamOrderedBuckets* buckets = stream_buckets()) {
    // The wait finds the bucket by its tensors; the ticket is written only where the host can (a
    // GPU's would cost a copy that waits for the stream).
    buckets->start(ctx.inputs, ctx.stream);
    if (ctx.outputs[0].device().is_cpu()) *ctx.outputs[0].data<int64_t>() = 0;
    return;
  }
  const ReplicaContext* replica = current_replica();
  int64_t ticket = -1;
  if (in_sync(replica) && replica->gradient_thread != nullptr) {
    ticket = replica->gradient_thread->start(flatten(ctx.inputs), replica->collectives->context());
  }
  *ctx.outputs[0].data<int64_t>() = ticket;
}

void all_reduce_wait_kernel(KernelContext& ctx) {
  const std::span<const Tensor> tensors = ctx.inputs.subspan(1);
  if (StreamOrderedBuckets* buckets = stream_buckets()) {
    buckets->wait(tensors, ctx.outputs, ctx.stream, step_context());
    return;
  }
  const int64_t ticket = *ctx.inputs[0].data<int64_t>();
  const ReplicaContext* replica = current_replica();
  if (!in_sync(replica)) {
    for (size_t i = 0; i < tensors.size(); ++i) ctx.outputs[i].copy_from(tensors[i]);
    return;
  }
  std::vector<float> flat;
  if (ticket >= 0 && replica->gradient_thread != nullptr) {
    flat = replica->gradient_thread->wait(ticket);
  } else {
    flat = flatten(tensors);
    replica->collectives->all_reduce(flat, ReduceOp::kSum);
  }
  unflatten(flat, ctx.outputs);
}

const bool kAllReduceStartReference = register_kernel(
    "all_reduce_start", {.name = kReferenceKernel, .dtypes = {DType::kF32}, .fn = all_reduce_start_kernel});
const bool kAllReduceWaitReference = register_kernel(
    "all_reduce_wait", {.name = kReferenceKernel, .dtypes = {DType::kI64}, .fn = all_reduce_wait_kernel});

// On a GPU the three run through the replica's stream-ordered buckets (NCCL); outside a replica
// they are the identity, and all_reduce_start's ticket (never read there) stays unwritten.
void all_reduce_on_device_kernel(KernelContext& ctx) {
  if (stream_buckets() != nullptr) return all_reduce_kernel(ctx);
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.outputs[i].copy_from(ctx.inputs[i]);
}
void all_reduce_start_on_device_kernel(KernelContext& ctx) {
  if (stream_buckets() != nullptr) all_reduce_start_kernel(ctx);
}
void all_reduce_wait_on_device_kernel(KernelContext& ctx) {
  if (stream_buckets() != nullptr) return all_reduce_wait_kernel(ctx);
  for (size_t i = 1; i < ctx.inputs.size(); ++i) ctx.outputs[i - 1].copy_from(ctx.inputs[i]);
}
const bool kAllReduceCuda = register_kernel("all_reduce", {.name = "stream_ordered",
                                                           .device = DeviceType::kCUDA,
                                                           .dtypes = {DType::kF32},
                                                           .fn = all_reduce_on_device_kernel});
const bool kAllReduceStartCuda = register_kernel("all_reduce_start", {.name = "stream_ordered",
                                                                      .device = DeviceType::kCUDA,
                                                                      .dtypes = {DType::kF32},
                                                                      .fn = all_reduce_start_on_device_kernel});
const bool kAllReduceWaitCuda = register_kernel("all_reduce_wait", {.name = "stream_ordered",
                                                                    .device = DeviceType::kCUDA,
                                                                    .dtypes = {DType::kI64},
                                                                    .fn = all_reduce_wait_on_device_kernel});

// Buckets of at most `bucket_bytes` over gradients of `bytes` each, taken last first (the order the
// backward pass makes them); gradients of 0 bytes (none) belong to no bucket.
std::vector<std::vector<size_t>> gradient_buckets(const std::vector<size_t>& bytes, size_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t bucket_size = 0;
  for (size_t i = bytes.size(); i-- > 0;) {
    if (bytes[i] == 0) continue;
    if (buckets.empty() || (!buckets.back().empty() && bucket_size + bytes[i] > bucket_bytes)) {
      buckets.emplace_back();
      bucket_size = 0;
    }
    buckets.back().push_back(i);
    bucket_size += bytes[i];
  }
  return buckets;
}

}  // namespace

std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& tensors) {
  return call_op(kAllReduce, std::span<const Tensor>(tensors));
}

void broadcast_from_replica_0(const std::vector<Tensor>& tensors) {
  const ReplicaContext* replica = current_replica();
  if (replica == nullptr) return;
  if (DeviceCollectives* collectives = replica->device_collectives) {
    Stream& compute = backend(replica->device.type).default_stream(replica->device.index);
    Stream& communication = collectives->stream();
    communication.wait(*compute.record());
    for (const Tensor& tensor : tensors) collectives->broadcast(tensor.raw_data(), tensor.nbytes(), 0, communication);
    const std::shared_ptr<Event> done = communication.record();
    collectives->wait_for(*done, replica->collectives->context());
    compute.wait(*done);
    return;
  }
  for (const Tensor& tensor : tensors) {
    replica->collectives->broadcast({static_cast<std::byte*>(tensor.raw_data()), tensor.nbytes()}, 0);
  }
}

std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& gradients, size_t bucket_bytes) {
  std::vector<size_t> bytes;
  bytes.reserve(gradients.size());
  for (const Tensor& gradient : gradients) bytes.push_back(gradient.defined() ? gradient.nbytes() : 0);
  std::vector<Tensor> reduced(gradients.size());
  for (const std::vector<size_t>& bucket : gradient_buckets(bytes, bucket_bytes)) {
    std::vector<Tensor> inputs;
    inputs.reserve(bucket.size());
    for (size_t i : bucket) inputs.push_back(gradients[i]);
    std::vector<Tensor> outputs = all_reduce_sum(inputs);
    for (size_t k = 0; k < bucket.size(); ++k) reduced[bucket[k]] = std::move(outputs[k]);
  }
  return reduced;
}

Tensor all_reduce_start(const std::vector<Tensor>& tensors) {
  return call_op(kAllReduceStart, std::span<const Tensor>(tensors))[0];
}

std::vector<Tensor> all_reduce_wait(const Tensor& ticket, const std::vector<Tensor>& tensors) {
  std::vector<Tensor> inputs = {ticket};
  inputs.insert(inputs.end(), tensors.begin(), tensors.end());
  return call_op(kAllReduceWait, std::span<const Tensor>(inputs));
}

OverlappedAllReduce::OverlappedAllReduce(const std::vector<Tensor>& variables, size_t bucket_bytes)
    : bucket_of_(variables.size()), gradients_(variables.size()) {
  std::vector<size_t> bytes;
  bytes.reserve(variables.size());
  for (const Tensor& variable : variables) bytes.push_back(variable.nbytes());
  buckets_ = gradient_buckets(bytes, bucket_bytes);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t i : buckets_[b]) bucket_of_[i] = b;
    missing_.push_back(buckets_[b].size());
  }
  tickets_.resize(buckets_.size());
}

void OverlappedAllReduce::ready(size_t i, const Tensor& gradient) {
  gradients_[i] = gradient;
  const size_t bucket = bucket_of_[i];
  if (--missing_[bucket] == 0) start(bucket);
}

void OverlappedAllReduce::start(size_t bucket) {
  std::vector<Tensor> inputs;
  for (size_t i : buckets_[bucket]) {
    if (gradients_[i].defined()) inputs.push_back(gradients_[i]);
  }
  if (!inputs.empty()) tickets_[bucket] = all_reduce_start(inputs);
}

std::vector<Tensor> OverlappedAllReduce::finish() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (missing_[b] != 0) start(b);
  }
  std::vector<Tensor> reduced(gradients_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!tickets_[b].defined()) continue;
    std::vector<size_t> members;
    std::vector<Tensor> inputs;
    for (size_t i : buckets_[b]) {
      if (!gradients_[i].defined()) continue;
      members.push_back(i);
      inputs.push_back(gradients_[i]);
    }
    std::vector<Tensor> outputs = all_reduce_wait(tickets_[b], inputs);
    for (size_t k = 0; k < members.size(); ++k) reduced[members[k]] = std::move(outputs[k]);
  }
  return reduced;
}

}  // namespace nimbus::distribute
