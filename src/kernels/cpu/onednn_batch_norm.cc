// batch_norm_training, batch_norm_inference and batch_norm_backward on
// oneDNN, f32. x is seen as (outer, C, inner) around its channel axis, which
// oneDNN reads in place (see data_desc). Primitives are cached per
// (direction, sizes, epsilon).
#include <bit>
#include <initializer_list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/onednn.h"

namespace nimbus::cpu {
namespace {

using dnnl::memory;
using internal::AxisSplit;

enum class Direction : int64_t { kTraining, kInference, kBackward };

AxisSplit channel_split(const Tensor& x, const Attrs& attrs, const std::string& op) {
  const bool channels_last = internal::parse_channels_last(attrs.get_string("data_format"), op);
  return AxisSplit(x.shape(), channels_last ? x.rank() - 1 : 1);
}

// x as 4-D, (outer, C, 1, 1) channels-last or (outer, C, inner, 1) channels-first: oneDNN runs
// 2-D "nc" and 3-D data on its generic kernels, measured 4-8x slower at 128x26x26x32.
memory::desc data_desc(const AxisSplit& s) {
  if (s.inner == 1) return memory::desc({s.outer, s.axis, 1, 1}, memory::data_type::f32, memory::format_tag::nhwc);
  return memory::desc({s.outer, s.axis, s.inner, 1}, memory::data_type::f32, memory::format_tag::nchw);
}

memory::desc channel_desc(const AxisSplit& s) {
  return memory::desc({s.axis}, memory::data_type::f32, memory::format_tag::a);
}

const dnnl::primitive& get_batch_norm(Direction direction, const AxisSplit& s, double epsilon) {
  const float eps = static_cast<float>(epsilon);
  const std::vector<int64_t> key{static_cast<int64_t>(direction), s.outer, s.axis, s.inner,
                                 static_cast<int64_t>(std::bit_cast<uint32_t>(eps))};
  const PrimitiveOwner owner = primitive_owner();  // one primitive per thread (onednn.h)
  static std::mutex mutex;
  static std::map<std::pair<PrimitiveOwner, std::vector<int64_t>>, dnnl::primitive> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find({owner, key});
  if (it != cache.end()) return it->second;

  using dnnl::normalization_flags;
  const memory::desc data = data_desc(s);
  const normalization_flags affine = normalization_flags::use_scale | normalization_flags::use_shift;
  dnnl::primitive primitive;
  if (direction == Direction::kInference) {
    NIMBUS_DNNL_CHECK(primitive = dnnl::batch_normalization_forward(dnnl::batch_normalization_forward::primitive_desc(
                          dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, data, eps,
                                                                  affine | normalization_flags::use_global_stats),
                          dnnl_engine())));
  } else {
    dnnl::batch_normalization_forward::primitive_desc forward;
    NIMBUS_DNNL_CHECK(forward = dnnl::batch_normalization_forward::primitive_desc(
                          dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, data, eps, affine),
                          dnnl_engine()));
    if (direction == Direction::kTraining) {
      NIMBUS_DNNL_CHECK(primitive = dnnl::batch_normalization_forward(forward));
    } else {
      NIMBUS_DNNL_CHECK(
          primitive = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
              dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, data, data, eps, affine),
              dnnl_engine(), forward)));
    }
  }
  return cache.emplace(std::pair(owner, key), std::move(primitive)).first->second;
}

// One oneDNN argument: its id, its buffer, and whether it is shaped like x (else like a channel vector).
struct Arg {
  int id;
  void* data;
  bool is_data;
};

void run(const dnnl::primitive& primitive, const AxisSplit& s, std::initializer_list<Arg> args) {
  const memory::desc data = data_desc(s), channel = channel_desc(s);
  std::unordered_map<int, memory> bound;
  for (const Arg& arg : args) bound.emplace(arg.id, memory(arg.is_data ? data : channel, dnnl_engine(), arg.data));
  dnnl::stream& stream = dnnl_stream();
  NIMBUS_DNNL_CHECK(primitive.execute(stream, bound));
  stream.wait();
}

// x (outer, C, inner), gamma, beta (C) -> y (outer, C, inner), mean, variance (C)
void onednn_training(KernelContext& ctx) {
  const AxisSplit s = channel_split(ctx.inputs[0], ctx.attrs, ctx.op.name);
  run(get_batch_norm(Direction::kTraining, s, ctx.attrs.get_float("epsilon")), s,
      {{DNNL_ARG_SRC, ctx.inputs[0].raw_data(), true},
       {DNNL_ARG_SCALE, ctx.inputs[1].raw_data(), false},
       {DNNL_ARG_SHIFT, ctx.inputs[2].raw_data(), false},
       {DNNL_ARG_DST, ctx.outputs[0].raw_data(), true},
       {DNNL_ARG_MEAN, ctx.outputs[1].raw_data(), false},
       {DNNL_ARG_VARIANCE, ctx.outputs[2].raw_data(), false}});
}

// x (outer, C, inner); gamma, beta, mean, variance (C) -> y (outer, C, inner)
void onednn_inference(KernelContext& ctx) {
  const AxisSplit s = channel_split(ctx.inputs[0], ctx.attrs, ctx.op.name);
  run(get_batch_norm(Direction::kInference, s, ctx.attrs.get_float("epsilon")), s,
      {{DNNL_ARG_SRC, ctx.inputs[0].raw_data(), true},
       {DNNL_ARG_SCALE, ctx.inputs[1].raw_data(), false},
       {DNNL_ARG_SHIFT, ctx.inputs[2].raw_data(), false},
       {DNNL_ARG_MEAN, ctx.inputs[3].raw_data(), false},
       {DNNL_ARG_VARIANCE, ctx.inputs[4].raw_data(), false},
       {DNNL_ARG_DST, ctx.outputs[0].raw_data(), true}});
}

// grad_y, x (outer, C, inner); gamma, mean, variance (C) -> grad_x (outer, C, inner), grad_gamma, grad_beta (C)
void onednn_backward(KernelContext& ctx) {
  const AxisSplit s = channel_split(ctx.inputs[1], ctx.attrs, ctx.op.name);
  // oneDNN's backward primitive takes the shift among its arguments, though the gradients do not depend on it.
  std::vector<float> unused_shift(static_cast<size_t>(s.axis), 0.0f);
  run(get_batch_norm(Direction::kBackward, s, ctx.attrs.get_float("epsilon")), s,
      {{DNNL_ARG_DIFF_DST, ctx.inputs[0].raw_data(), true},
       {DNNL_ARG_SRC, ctx.inputs[1].raw_data(), true},
       {DNNL_ARG_SCALE, ctx.inputs[2].raw_data(), false},
       {DNNL_ARG_MEAN, ctx.inputs[3].raw_data(), false},
       {DNNL_ARG_VARIANCE, ctx.inputs[4].raw_data(), false},
       {DNNL_ARG_SHIFT, unused_shift.data(), false},
       {DNNL_ARG_DIFF_SRC, ctx.outputs[0].raw_data(), true},
       {DNNL_ARG_DIFF_SCALE, ctx.outputs[1].raw_data(), false},
       {DNNL_ARG_DIFF_SHIFT, ctx.outputs[2].raw_data(), false}});
}

KernelDef onednn_kernel(KernelFn fn) {
  return {.name = "onednn",
          .device = DeviceType::kCPU,
          .dtypes = {DType::kF32},
          .priority = 100,
          .fn = std::move(fn),
          .supports = [](const KernelContext& ctx) { return ctx.outputs[0].numel() > 0; }};
}

const bool kRegistered = register_kernel("batch_norm_training", onednn_kernel(onednn_training)) &&
                         register_kernel("batch_norm_inference", onednn_kernel(onednn_inference)) &&
                         register_kernel("batch_norm_backward", onednn_kernel(onednn_backward));

}  // namespace
}  // namespace nimbus::cpu
