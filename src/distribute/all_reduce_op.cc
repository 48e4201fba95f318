// The all_reduce op: its kernel hands the replica's buffers to the replica's
// collectives (strategy.h's current_replica), so the same traced step runs on
// every replica's thread or process.
#include <fmt/format.h>

#include <cstring>

#include "nimbus/distribute/all_reduce.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"

namespace nimbus::distribute {
namespace {

const OpSchema& kAllReduce = define_op({
    .name = "all_reduce",
    .summary = "each input summed over the replicas in sync, one collective for all (identity outside a replica)",
    .kind = OpKind::kShape,
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

void all_reduce_kernel(KernelContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.outputs[i].copy_from(ctx.inputs[i]);
  const ReplicaContext* replica = current_replica();
  if (replica == nullptr || replica->num_replicas == 1) return;
  size_t count = 0;
  for (const Tensor& input : ctx.inputs) count += static_cast<size_t>(input.numel());
  if (ctx.outputs.size() == 1) {
    replica->collectives->all_reduce({ctx.outputs[0].data<float>(), count}, ReduceOp::kSum);
    return;
  }
  // One collective for the bucket: its tensors laid end to end.
  std::vector<float> flat(count);
  size_t offset = 0;
  for (const Tensor& output : ctx.outputs) {
    std::memcpy(flat.data() + offset, output.data<float>(), output.nbytes());
    offset += static_cast<size_t>(output.numel());
  }
  replica->collectives->all_reduce(flat, ReduceOp::kSum);
  offset = 0;
  for (Tensor& output : ctx.outputs) {
    std::memcpy(output.data<float>(), flat.data() + offset, output.nbytes());
    offset += static_cast<size_t>(output.numel());
  }
}

const bool kAllReduceReference =
    register_kernel("all_reduce", {.name = kReferenceKernel, .dtypes = {DType::kF32}, .fn = all_reduce_kernel});

}  // namespace

std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& tensors) {
  return call_op(kAllReduce, std::span<const Tensor>(tensors));
}

std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& gradients, size_t bucket_bytes) {
  std::vector<Tensor> reduced(gradients.size());
  std::vector<size_t> bucket;
  size_t bucket_size = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<Tensor> inputs;
    for (size_t i : bucket) inputs.push_back(gradients[i]);
    std::vector<Tensor> outputs = all_reduce_sum(inputs);
    for (size_t k = 0; k < bucket.size(); ++k) reduced[bucket[k]] = std::move(outputs[k]);
    bucket.clear();
    bucket_size = 0;
  };
  for (size_t i = gradients.size(); i-- > 0;) {
    if (!gradients[i].defined()) continue;
    const size_t bytes = gradients[i].nbytes();
    if (!bucket.empty() && bucket_size + bytes > bucket_bytes) flush();
    bucket.push_back(i);
    bucket_size += bytes;
  }
  flush();
  return reduced;
}

}  // namespace nimbus::distribute
