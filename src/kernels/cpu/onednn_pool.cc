// max_pool2d and avg_pool2d on oneDNN, in the caller's layout (nhwc or nchw).
// Forward only, for inference propagation: max pooling then needs no
// workspace, because max_pool2d_backward recomputes each window's maximum
// (src/kernels/cpu/pool_backward.cc). Primitives are cached per geometry.
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/onednn.h"
#include "src/kernels/cpu/onednn_image.h"

namespace nimbus::cpu {
namespace {

using dnnl::memory;
using internal::Pool2dGeometry;

const dnnl::pooling_forward& get_pool(dnnl::algorithm algorithm, const Pool2dGeometry& g, DType dtype) {
  const std::vector<int64_t> key{static_cast<int64_t>(algorithm),
                                 static_cast<int64_t>(dtype),
                                 g.input.batch,
                                 g.input.height,
                                 g.input.width,
                                 g.input.channels,
                                 g.input.channels_last,
                                 g.rows.kernel,
                                 g.cols.kernel,
                                 g.rows.stride,
                                 g.cols.stride,
                                 g.rows.pad_before,
                                 g.cols.pad_before,
                                 g.rows.pad_after,
                                 g.cols.pad_after};
  const PrimitiveOwner owner = primitive_owner();  // one primitive per thread (onednn.h)
  static std::mutex mutex;
  static std::map<std::pair<PrimitiveOwner, std::vector<int64_t>>, dnnl::pooling_forward> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find({owner, key});
  if (it != cache.end()) return it->second;
  dnnl::pooling_forward primitive;
  NIMBUS_DNNL_CHECK(primitive = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(
                        dnnl::pooling_forward::desc(
                            dnnl::prop_kind::forward_inference, algorithm, image_desc(g.input, dtype),
                            image_desc(g.output, dtype), {g.rows.stride, g.cols.stride}, {g.rows.kernel, g.cols.kernel},
                            {g.rows.pad_before, g.cols.pad_before}, {g.rows.pad_after, g.cols.pad_after}),
                        dnnl_engine())));
  return cache.emplace(std::pair(owner, key), std::move(primitive)).first->second;
}

// x (N,H,W,C) | (N,C,H,W) -> y (N,OH,OW,C) | (N,C,OH,OW)
void onednn_pool(KernelContext& ctx, dnnl::algorithm algorithm) {
  const Pool2dGeometry g(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
  const DType dtype = ctx.inputs[0].dtype();
  const dnnl::pooling_forward& pool = get_pool(algorithm, g, dtype);
  dnnl::stream& stream = dnnl_stream();
  NIMBUS_DNNL_CHECK(pool.execute(
      stream, {{DNNL_ARG_SRC, memory(image_desc(g.input, dtype), dnnl_engine(), ctx.inputs[0].raw_data())},
               {DNNL_ARG_DST, memory(image_desc(g.output, dtype), dnnl_engine(), ctx.outputs[0].raw_data())}}));
  stream.wait();
}

KernelDef onednn_kernel(dnnl::algorithm algorithm) {
  return {.name = "onednn",
          .device = DeviceType::kCPU,
          .dtypes = {DType::kF32, DType::kBF16},
          .priority = 100,
          .fn = [algorithm](KernelContext& ctx) { onednn_pool(ctx, algorithm); },
          .supports = [](const KernelContext& ctx) { return dnnl_runs_natively(ctx.inputs, ctx.outputs); }};
}

// avg_pool2d divides by the taps inside the input, TF's rule: oneDNN's exclude-padding average.
const bool kRegistered = register_kernel("max_pool2d", onednn_kernel(dnnl::algorithm::pooling_max)) &&
                         register_kernel("avg_pool2d", onednn_kernel(dnnl::algorithm::pooling_avg_exclude_padding));

}  // namespace
}  // namespace nimbus::cpu
