// scaled_dot_product_attention and its backward op on CUDA (f32, bf16, f16 in
// f32), launching src/device/cuda/kernels/attention_kernels.cu; head sizes up
// to kAttentionMaxHeadSize. A backward call that asks for the scores' gradient
// (a mask that needs its gradient) has no CUDA kernel: supports() says so.
#include "nimbus/device/backend.h"
#include "nimbus/ops/for_kernels/attention_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/attention_kernels.h"

namespace nimbus::cuda {
namespace {

kernels::FloatType float_type_of(DType dtype) {
  return dtype == DType::kBF16  ? kernels::FloatType::kBF16
         : dtype == DType::kF16 ? kernels::FloatType::kF16
                                : kernels::FloatType::kF32;
}

kernels::AttentionShape attention_shape(const KernelContext& ctx, int first) {
  const internal::AttentionGeometry g(ctx, first);
  const Shape& q = ctx.inputs[static_cast<size_t>(first)].shape();
  return {.batch = q[0],
          .heads = q[1],
          .queries = g.queries,
          .keys = g.keys,
          .head_size = g.head_size,
          .value_size = g.value_size,
          .mask_batch_stride = g.mask_batch_stride,
          .mask_head_stride = g.mask_head_stride,
          .mask_query_stride = g.mask_query_stride,
          .scale = static_cast<float>(g.scale),
          .causal = g.causal};
}

const void* input_or_null(const KernelContext& ctx, size_t index) {
  return index < ctx.inputs.size() ? ctx.inputs[index].raw_data() : nullptr;
}

void attention(KernelContext& ctx) {
  const kernels::AttentionShape shape = attention_shape(ctx, 0);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::attention_forward(float_type_of(ctx.inputs[0].dtype()), ctx.inputs[0].raw_data(),
                                               ctx.inputs[1].raw_data(), ctx.inputs[2].raw_data(),
                                               input_or_null(ctx, 3), ctx.outputs[0].raw_data(),
                                               static_cast<float*>(ctx.outputs[1].raw_data()), shape, stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("attention_forward", stream);
}

void attention_backward(KernelContext& ctx) {
  const kernels::AttentionShape shape = attention_shape(ctx, 1);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  // delta (B x H x T floats) from the device's allocator; freeing it right after the enqueue is safe
  // because every later user of the block runs on the same stream.
  Allocator& allocator = backend(DeviceType::kCUDA).allocator(stream.device().index);
  const size_t delta_bytes = static_cast<size_t>(shape.batch * shape.heads * shape.queries) * sizeof(float);
  void* delta = allocator.allocate(delta_bytes);
  const cudaError_t status = kernels::attention_backward(
      float_type_of(ctx.inputs[1].dtype()), ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
      ctx.inputs[2].raw_data(), ctx.inputs[3].raw_data(), input_or_null(ctx, 7), ctx.inputs[4].raw_data(),
      static_cast<const float*>(ctx.inputs[5].raw_data()), static_cast<const float*>(ctx.inputs[6].raw_data()),
      static_cast<float*>(delta), ctx.outputs[0].raw_data(), ctx.outputs[1].raw_data(), ctx.outputs[2].raw_data(),
      shape, stream.handle());
  allocator.deallocate(delta, delta_bytes);
  NIMBUS_CUDA_CHECK(status);
  NIMBUS_CUDA_CHECK_LAUNCH("attention_backward", stream);
}

bool head_sizes_fit(const KernelContext& ctx, int first) {
  const internal::AttentionGeometry g(ctx, first);
  return g.head_size <= kernels::kAttentionMaxHeadSize && g.value_size <= kernels::kAttentionMaxHeadSize;
}

const bool kRegistered =
    register_kernel("scaled_dot_product_attention",
                    {.name = "cuda",
                     .device = DeviceType::kCUDA,
                     .dtypes = {DType::kF32, DType::kBF16, DType::kF16},
                     .priority = 1,
                     .fn = attention,
                     .supports = [](const KernelContext& ctx) { return head_sizes_fit(ctx, 0); }}) &&
    register_kernel(
        "scaled_dot_product_attention_backward",
        {.name = "cuda",
         .device = DeviceType::kCUDA,
         .dtypes = {DType::kF32, DType::kBF16, DType::kF16},
         .priority = 1,
         .fn = attention_backward,
         .supports = [](const KernelContext& ctx) { return ctx.outputs.size() == 3 && head_sizes_fit(ctx, 1); }});

}  // namespace
}  // namespace nimbus::cuda
