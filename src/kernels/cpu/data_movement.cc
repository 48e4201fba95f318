// Fast CPU kernels for the data movement a training step leans on: gather
// (embedding lookups), concat, split, slice, transposes that keep the last
// axis (attention's heads moved in and out of (batch, heads, sequence, size)),
// and broadcasts that keep the last axis (a position table over the batch). Each copies contiguous runs of
// bytes with memcpy, spread over the compute pool, instead of element by
// element; the reference kernels in src/ops/ stay the oracle. Every dtype is
// served, since only element sizes matter.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "nimbus/ops/for_kernels/gather_geometry.h"
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

using internal::AxisSplit;

// Above the reference, below vendor primitives.
constexpr int kMemcpyPriority = 50;
// Fewer bytes than this per task and starting threads costs more than copying: the bytes of
// kMemoryBoundGrain floats, as for the other memory-bound kernels (a batch-32 MLP batch, 32 rows of
// 3,136 bytes, is gathered on the calling thread).
constexpr int64_t kBytesPerTask = kMemoryBoundGrain * static_cast<int64_t>(sizeof(float));

int64_t grain_for(int64_t run_bytes) { return std::max<int64_t>(1, kBytesPerTask / std::max<int64_t>(run_bytes, 1)); }

const char* bytes(const Tensor& tensor) { return static_cast<const char*>(tensor.raw_data()); }
char* mutable_bytes(Tensor& tensor) { return static_cast<char*>(tensor.raw_data()); }

// `rows` runs of `run` bytes: row r goes from src + r * src_row to dst + r * dst_row.
void copy_rows(const char* src, int64_t src_row, char* dst, int64_t dst_row, int64_t rows, int64_t run) {
  parallel_for(rows, grain_for(run), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(dst + r * dst_row, src + r * src_row, static_cast<size_t>(run));
    }
  });
}

// params (outer, axis, inner), indices (count) -> out (outer, count, inner):
// each (o, n) copies one row of `inner` elements.
void gather_rows(KernelContext& ctx) {
  const Tensor& params = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), params.rank(), "gather");
  const std::vector<int64_t> indices = internal::checked_indices("gather", ctx.inputs[1], params.shape(), axis);
  const AxisSplit split(params.shape(), axis);
  const int64_t count = std::ssize(indices);
  const int64_t row = split.inner * static_cast<int64_t>(dtype_size(params.dtype()));
  const char* src = bytes(params);
  char* dst = mutable_bytes(ctx.outputs[0]);
  parallel_for(split.outer * count, grain_for(row), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / count, n = r % count;
      std::memcpy(dst + r * row, src + (o * split.axis + indices[static_cast<size_t>(n)]) * row,
                  static_cast<size_t>(row));
    }
  });
}

// inputs (outer, axis_i, inner) -> out (outer, sum of axis_i, inner): for each
// outer index, an input's (axis_i, inner) block is one run.
void concat_blocks(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), out.rank(), "concat");
  const int64_t element = static_cast<int64_t>(dtype_size(out.dtype()));
  const AxisSplit out_split(out.shape(), axis);
  const int64_t out_row = out_split.axis * out_split.inner * element;
  int64_t offset = 0;
  for (const Tensor& input : ctx.inputs) {
    const AxisSplit in_split(input.shape(), axis);
    const int64_t run = in_split.axis * in_split.inner * element;
    copy_rows(bytes(input), run, mutable_bytes(out) + offset, out_row, in_split.outer, run);
    offset += run;
  }
}

// The inverse of concat_blocks.
void split_blocks(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), "split");
  const int64_t element = static_cast<int64_t>(dtype_size(x.dtype()));
  const AxisSplit in_split(x.shape(), axis);
  const int64_t in_row = in_split.axis * in_split.inner * element;
  int64_t offset = 0;
  for (Tensor& piece : ctx.outputs) {
    const AxisSplit out_split(piece.shape(), axis);
    const int64_t run = out_split.axis * out_split.inner * element;
    copy_rows(bytes(x) + offset, in_row, mutable_bytes(piece), run, out_split.outer, run);
    offset += run;
  }
}

// The trailing axes that the slice takes whole, together with the last axis it
// cuts, are contiguous in both tensors: one run per coordinate of the axes before.
void slice_runs(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const std::vector<int64_t>& begin = ctx.attrs.get_ints("begin");
  const int64_t element = static_cast<int64_t>(dtype_size(x.dtype()));
  int cut = x.rank() - 1;
  int64_t run = 1;
  while (cut >= 0 && out.dim(cut) == x.dim(cut)) run *= x.dim(cut--);
  if (cut >= 0) run *= out.dim(cut);
  if (run == 0) return;
  const auto x_strides = x.shape().strides();
  const std::span<const int64_t> out_dims = out.shape().dims();
  const int64_t start = cut >= 0 ? begin[static_cast<size_t>(cut)] * x_strides[static_cast<size_t>(cut)] : 0;
  const char* src = bytes(x);
  char* dst = mutable_bytes(out);
  parallel_for(out.numel() / run, grain_for(run * element), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      int64_t offset = start, rest = r;
      for (int d = cut - 1; d >= 0; --d) {
        const size_t axis = static_cast<size_t>(d);
        offset += (rest % out_dims[axis] + begin[axis]) * x_strides[axis];
        rest /= out_dims[axis];
      }
      std::memcpy(dst + r * run * element, src + offset * element, static_cast<size_t>(run * element));
    }
  });
}

// Where consecutive output rows (runs along the last axis) start in the input, in elements: the row's
// index over the output's leading axes, each axis stepping the input by its own stride (0 where it
// broadcasts). The index is found by division once, at the first row of a range, then walked.
class RowOffsets {
 public:
  RowOffsets(std::span<const int64_t> dims, std::span<const int64_t> strides, int64_t first)
      : dims_(dims), strides_(strides), index_(dims.size()) {
    int64_t rest = first;
    for (size_t axis = dims.size(); axis-- > 0;) {
      index_[axis] = rest % dims[axis];
      rest /= dims[axis];
      offset_ += index_[axis] * strides[axis];
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t axis = dims_.size(); axis-- > 0;) {
      offset_ += strides_[axis];
      if (++index_[axis] < dims_[axis]) return;
      offset_ -= strides_[axis] * index_[axis];
      index_[axis] = 0;
    }
  }

 private:
  std::span<const int64_t> dims_, strides_;
  std::vector<int64_t> index_;
  int64_t offset_ = 0;
};

// Copies the output's rows of `run` elements from the input, given the input stride of each of the
// output's leading axes.
void copy_strided_rows(const Tensor& x, Tensor& out, const std::vector<int64_t>& strides, int64_t run) {
  const int64_t element = static_cast<int64_t>(dtype_size(x.dtype()));
  const std::span<const int64_t> leading = out.shape().dims().first(static_cast<size_t>(std::max(out.rank() - 1, 0)));
  const char* src = bytes(x);
  char* dst = mutable_bytes(out);
  parallel_for(out.numel() / run, grain_for(run * element), [&](int64_t first, int64_t last) {
    RowOffsets rows(leading, strides, first);
    for (int64_t r = first; r < last; ++r, rows.next()) {
      std::memcpy(dst + r * run * element, src + rows.offset() * element, static_cast<size_t>(run * element));
    }
  });
}

// A transpose whose last axis stays last: each output row of that axis is one run of the input,
// found through the input's strides in the output's axis order.
void transpose_rows(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const std::vector<int64_t>& perm = ctx.attrs.get_ints("perm");
  const int rank = x.rank();
  const int64_t run = rank == 0 ? 1 : x.dim(rank - 1);
  if (out.numel() == 0 || run == 0) return;
  const auto x_strides = x.shape().strides();
  std::vector<int64_t> strides;
  for (int d = 0; d + 1 < rank; ++d) strides.push_back(x_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])]);
  copy_strided_rows(x, out, strides, run);
}

// A broadcast whose last axis is the input's own: each output row of that axis is one input row,
// found with stride 0 on the broadcast (and added leading) axes.
void broadcast_rows(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int rank = out.rank(), added = out.rank() - x.rank();
  const int64_t run = rank == 0 ? 1 : out.dim(rank - 1);
  if (out.numel() == 0 || run == 0) return;
  const auto x_strides = x.shape().strides();
  std::vector<int64_t> strides(static_cast<size_t>(std::max(rank - 1, 0)), 0);
  for (int d = added; d + 1 < rank; ++d) {
    if (x.dim(d - added) != 1) strides[static_cast<size_t>(d)] = x_strides[static_cast<size_t>(d - added)];
  }
  copy_strided_rows(x, out, strides, run);
}

bool broadcast_keeps_last_axis(const KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  return x.rank() > 0 && x.dim(-1) == ctx.outputs[0].dim(-1);
}

bool keeps_last_axis(const KernelContext& ctx) {
  const std::vector<int64_t>& perm = ctx.attrs.get_ints("perm");
  return !perm.empty() && perm.back() == static_cast<int64_t>(perm.size()) - 1;
}

KernelDef memcpy_kernel(KernelFn fn) {
  return {.name = "memcpy",
          .device = DeviceType::kCPU,
          .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
          .priority = kMemcpyPriority,
          .fn = std::move(fn)};
}

// A memcpy kernel for the calls `supports` accepts; the reference takes the rest.
KernelDef memcpy_kernel_for(KernelFn fn, std::function<bool(const KernelContext&)> supports) {
  KernelDef kernel = memcpy_kernel(std::move(fn));
  kernel.supports = std::move(supports);
  return kernel;
}

const bool kRegistered =
    register_kernel("gather", memcpy_kernel(gather_rows)) && register_kernel("concat", memcpy_kernel(concat_blocks)) &&
    register_kernel("split", memcpy_kernel(split_blocks)) && register_kernel("slice", memcpy_kernel(slice_runs)) &&
    register_kernel("transpose", memcpy_kernel_for(transpose_rows, keeps_last_axis)) &&
    register_kernel("broadcast_to", memcpy_kernel_for(broadcast_rows, broadcast_keeps_last_axis));

}  // namespace
}  // namespace nimbus::cpu
