// transpose, slice, pad, broadcast_to and concat on CUDA, any dtype. The
// first four are one remapping kernel (src/device/cuda/kernels/layout_kernels.cu)
// given each op's strides and shifts; concat copies each input's (outer, axis x inner)
// rows into its columns of the output with cudaMemcpy2DAsync.
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/layout_kernels.h"
#include "src/kernels/cuda/value_pattern.h"

namespace nimbus::cuda {
namespace {

// The remap of x onto the output's shape: output axis d walks x's axis axes[d], shifted by shift[d].
kernels::Remap remap_of(const Tensor& x, const Shape& out, const std::vector<int64_t>& axes,
                        const std::vector<int64_t>& shift) {
  kernels::Remap r;
  r.rank = out.rank();
  const auto strides = x.shape().strides();
  for (int d = 0; d < out.rank(); ++d) {
    const auto axis = static_cast<size_t>(axes[static_cast<size_t>(d)]);
    r.dims[d] = out.dims()[d];
    r.source_dims[d] = x.shape().dims()[static_cast<int>(axis)];
    r.strides[d] = strides[axis];
    r.shift[d] = shift[static_cast<size_t>(d)];
  }
  return r;
}

void launch_remap(KernelContext& ctx, const kernels::Remap& remap, uint64_t pattern) {
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::remap(ctx.inputs[0].raw_data(), out.raw_data(), out.numel(),
                                   static_cast<int>(dtype_size(out.dtype())), remap, pattern,
                                   multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

std::vector<int64_t> identity_axes(int rank) {
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) axes[static_cast<size_t>(d)] = d;
  return axes;
}

void transpose(KernelContext& ctx) {
  const int rank = ctx.outputs[0].rank();
  launch_remap(ctx,
               remap_of(ctx.inputs[0], ctx.outputs[0].shape(), ctx.attrs.get_ints("perm"),
                        std::vector<int64_t>(static_cast<size_t>(rank), 0)),
               0);
}

void slice(KernelContext& ctx) {
  std::vector<int64_t> shift = ctx.attrs.get_ints("begin");
  for (int64_t& s : shift) s = -s;
  launch_remap(ctx, remap_of(ctx.inputs[0], ctx.outputs[0].shape(), identity_axes(ctx.outputs[0].rank()), shift), 0);
}

void pad(KernelContext& ctx) {
  const std::vector<int64_t>& paddings = ctx.attrs.get_ints("paddings");  // before0, after0, before1, ...
  std::vector<int64_t> before;
  for (size_t i = 0; i < paddings.size(); i += 2) before.push_back(paddings[i]);
  launch_remap(ctx, remap_of(ctx.inputs[0], ctx.outputs[0].shape(), identity_axes(ctx.outputs[0].rank()), before),
               value_pattern(ctx.outputs[0].dtype(), ctx.attrs.get_float("value")));
}

// Each output axis walks x's axis aligned with it from the right (numpy's broadcasting), with stride 0 where x
// has size 1 there or no axis at all.
void broadcast_to(KernelContext& ctx) {
  const Shape& x = ctx.inputs[0].shape();
  const Shape& out = ctx.outputs[0].shape();
  const auto strides = x.strides();
  const int leading = out.rank() - x.rank();
  kernels::Remap r;
  r.rank = out.rank();
  for (int d = 0; d < out.rank(); ++d) {
    const int axis = d - leading;
    r.dims[d] = out.dims()[d];
    r.source_dims[d] = out.dims()[d];
    r.strides[d] = axis >= 0 && x.dims()[axis] != 1 ? strides[static_cast<size_t>(axis)] : 0;
  }
  launch_remap(ctx, r, 0);
}

void concat(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), out.rank(), "concat");
  const internal::AxisSplit out_split(out.shape(), axis);
  const size_t element = dtype_size(out.dtype());
  const size_t out_row = static_cast<size_t>(out_split.axis * out_split.inner) * element;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(cudaSetDevice(stream.device().index));
  size_t column = 0;  // bytes into each output row where this input's rows go
  for (const Tensor& input : ctx.inputs) {
    const internal::AxisSplit split(input.shape(), axis);
    const size_t row = static_cast<size_t>(split.axis * split.inner) * element;
    if (row > 0 && split.outer > 0) {
      NIMBUS_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<std::byte*>(out.raw_data()) + column, out_row, input.raw_data(),
                                          row, row, static_cast<size_t>(split.outer), cudaMemcpyDeviceToDevice,
                                          stream.handle()));
    }
    column += row;
  }
}

const bool kRegistered = [] {
  const std::vector<DType> all(std::begin(kAllDTypes), std::end(kAllDTypes));
  for (const auto& [op, fn] : std::initializer_list<std::pair<const char*, KernelFn>>{{"transpose", transpose},
                                                                                      {"slice", slice},
                                                                                      {"pad", pad},
                                                                                      {"broadcast_to", broadcast_to},
                                                                                      {"concat", concat}}) {
    register_kernel(op, {.name = "cuda", .device = DeviceType::kCUDA, .dtypes = all, .priority = 1, .fn = fn});
  }
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
