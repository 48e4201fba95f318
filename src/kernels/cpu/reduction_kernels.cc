// Vectorized, multithreaded, deterministic reductions: sum, mean, reduce_max,
// reduce_min on f32 and f64, and on f16 and bf16, which are widened to f32 a
// block at a time (half_convert.h), reduced as f32 and rounded once at the end.
// Layout: after dropping size-1 axes and merging adjacent axes, the input is
// (outer, reduced, inner) with the reduced axes contiguous: reductions over
// trailing axes (inner = 1: rows), over leading axes (outer = 1: bias
// gradients (N,D) -> (D)), over middle axes, and over all axes. Reductions
// over axes that are not adjacent go to the reference kernel.
//
// Determinism: the reduced range is cut into blocks whose size depends only on
// the shape; each block is reduced in a fixed order (vector lanes, then a
// fixed tree over lanes), and block results are combined in block order in
// f64. So results are bit-identical run to run and for any thread count.
// Within a block, each accumulator lane (in the input's type) adds at most
// 256 values; block results are combined in f64.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/column_blocks.h"
#include "src/kernels/cpu/half_convert.h"
#include "src/kernels/cpu/parallel.h"
#include "src/kernels/cpu/simd.h"

namespace nimbus::cpu {
namespace {

struct ReduceLayout {
  int64_t outer = 1, reduced = 1, inner = 1;
};

// The (outer, reduced, inner) view of a reduction, or nullopt when the reduced axes are not adjacent.
std::optional<ReduceLayout> reduce_layout(const Shape& shape, std::span<const int64_t> axes, const char* op) {
  std::vector<bool> is_reduced(static_cast<size_t>(shape.rank()), false);
  for (int axis : normalize_axes(axes, shape.rank(), op)) is_reduced[static_cast<size_t>(axis)] = true;
  struct Run {
    bool reduced;
    int64_t size;
  };
  std::vector<Run> runs;
  for (int axis = 0; axis < shape.rank(); ++axis) {
    const int64_t dim = shape.dims()[axis];
    if (dim == 1) continue;
    const bool reduced = is_reduced[static_cast<size_t>(axis)];
    if (!runs.empty() && runs.back().reduced == reduced) {
      runs.back().size *= dim;
    } else {
      runs.push_back({reduced, dim});
    }
  }
  ReduceLayout layout;
  size_t i = 0;
  if (i < runs.size() && !runs[i].reduced) layout.outer = runs[i++].size;
  if (i < runs.size() && runs[i].reduced) layout.reduced = runs[i++].size;
  if (i < runs.size() && !runs[i].reduced) layout.inner = runs[i++].size;
  if (i != runs.size()) return std::nullopt;
  return layout;
}

// Reduction policies: identity, combine (generic over scalars and vectors) and finish.
struct Sum {
  static constexpr double kIdentity = 0.0;
  template <typename V>
  static V combine(V acc, V value) {
    return acc + value;
  }
  static double finish(double acc, int64_t) { return acc; }
};

struct Mean : Sum {
  static double finish(double acc, int64_t count) { return acc / static_cast<double>(count); }
};

// NaN wins and stays, as in the reference kernels.
struct Max {
  static constexpr double kIdentity = -std::numeric_limits<double>::infinity();
  template <typename V>
  static V combine(V acc, V value) {
    return (value > acc) | (value != value) ? value : acc;
  }
  static double finish(double acc, int64_t) { return acc; }
};

struct Min {
  static constexpr double kIdentity = std::numeric_limits<double>::infinity();
  template <typename V>
  static V combine(V acc, V value) {
    return (value < acc) | (value != value) ? value : acc;
  }
  static double finish(double acc, int64_t) { return acc; }
};

// Elements per block of a contiguous reduction (32 f32 lanes of 256 values); reducing over leading axes,
// blocks as ColumnBlocks cuts them.
constexpr int64_t kBlockElements = ColumnBlocks::kBlockElements;

// The type a reduction over T accumulates in: f16 and bf16 in f32.
template <typename T>
using Held = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// x[0, n) as Held<T>: x itself, or widened into `buffer` (n elements at least).
template <typename T>
const Held<T>* held(const T* x, int64_t n, Held<T>* buffer) {
  if constexpr (std::is_same_v<Held<T>, T>) {
    return x;
  } else {
    widen(x, buffer, n);
    return buffer;
  }
}

// A per-thread buffer for held(): empty where T needs none.
template <typename T>
std::vector<Held<T>> held_buffer(int64_t n) {
  return std::vector<Held<T>>(std::is_same_v<Held<T>, T> ? 0 : static_cast<size_t>(n));
}

// A finished result stored as T, through f32 for f16 and bf16 (as an f32 result rounded once).
template <typename T>
T stored(double value) {
  return static_cast<T>(static_cast<Held<T>>(value));
}

// Reduces x[0, n) with four vector accumulators, then over their lanes in a fixed tree.
template <typename Op, typename T>
T reduce_contiguous(const T* x, int64_t n) {
  using V = simd::Vec<T>;
  constexpr int64_t kLanes = simd::kLanes<T>;
  const T identity = static_cast<T>(Op::kIdentity);
  V acc[4] = {simd::splat<V>(identity), simd::splat<V>(identity), simd::splat<V>(identity), simd::splat<V>(identity)};
  int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    for (int k = 0; k < 4; ++k) acc[k] = Op::combine(acc[k], simd::load<V>(x + i + k * kLanes));
  }
  for (; i + kLanes <= n; i += kLanes) acc[0] = Op::combine(acc[0], simd::load<V>(x + i));
  if (i < n) {
    T padded[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) padded[l] = i + l < n ? x[i + l] : identity;
    acc[1] = Op::combine(acc[1], simd::load<V>(padded));
  }
  V total = Op::combine(Op::combine(acc[0], acc[1]), Op::combine(acc[2], acc[3]));
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) total[l] = Op::combine(total[l], total[l + width]);
  }
  return total[0];
}

// Rows of x (outer, reduced) reduced to (outer): one block per row when rows are
// short, otherwise blocks of kBlockElements combined in order.
template <typename Op, typename T>
void reduce_rows(const T* x, T* out, const ReduceLayout& layout, int64_t count) {
  const int64_t rows = layout.outer, length = layout.reduced;
  const int64_t blocks = (length + kBlockElements - 1) / kBlockElements;
  if (blocks == 1) {
    parallel_for(rows, std::max<int64_t>(1, kMemoryBoundGrain / length), [&](int64_t begin, int64_t end) {
      std::vector<Held<T>> buffer = held_buffer<T>(length);
      for (int64_t r = begin; r < end; ++r) {
        const Held<T>* row = held(x + r * length, length, buffer.data());
        out[r] = stored<T>(Op::finish(reduce_contiguous<Op>(row, length), count));
      }
    });
    return;
  }
  std::vector<double> partial(static_cast<size_t>(rows * blocks));
  parallel_for(rows * blocks, kMemoryBoundGrain / kBlockElements, [&](int64_t begin, int64_t end) {
    std::vector<Held<T>> buffer = held_buffer<T>(kBlockElements);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / blocks, b = item % blocks;
      const int64_t start = b * kBlockElements, size = std::min(kBlockElements, length - start);
      partial[static_cast<size_t>(item)] =
          reduce_contiguous<Op>(held(x + r * length + start, size, buffer.data()), size);
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    double acc = Op::kIdentity;
    for (int64_t b = 0; b < blocks; ++b) acc = Op::combine(acc, partial[static_cast<size_t>(r * blocks + b)]);
    out[r] = stored<T>(Op::finish(acc, count));
  }
}

// x (outer, reduced, inner) reduced to (outer, inner), vectorized along inner.
// Work items are (outer index, block of rows, block of columns), as ColumnBlocks cuts (reduced, inner).
template <typename Op, typename T>
void reduce_columns(const T* x, T* out, const ReduceLayout& layout, int64_t count) {
  const int64_t inner = layout.inner, reduced = layout.reduced;
  const ColumnBlocks blocks(reduced, inner);
  const int64_t row_blocks = blocks.row_blocks;
  std::vector<double> partial(row_blocks > 1 ? static_cast<size_t>(layout.outer * row_blocks * inner) : 0);
  const Held<T> identity = static_cast<Held<T>>(Op::kIdentity);
  parallel_for(layout.outer * blocks.items(), blocks.grain(), [&](int64_t begin, int64_t end) {
    Held<T> acc[ColumnBlocks::kColumnsPerBlock];
    std::vector<Held<T>> buffer = held_buffer<T>(ColumnBlocks::kColumnsPerBlock);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t o = item / blocks.items();
      const ColumnBlocks::Block b = blocks.block(item % blocks.items());
      const int64_t c0 = b.first_column, columns = b.columns;
      std::fill(acc, acc + columns, identity);
      for (int64_t r = b.first_row; r < b.end_row; ++r) {
        const Held<T>* row = held(x + (o * reduced + r) * inner + c0, columns, buffer.data());
#pragma omp simd
        for (int64_t c = 0; c < columns; ++c) acc[c] = Op::combine(acc[c], row[c]);
      }
      if (row_blocks == 1) {
        for (int64_t c = 0; c < columns; ++c) out[o * inner + c0 + c] = stored<T>(Op::finish(acc[c], count));
      } else {
        double* slot = partial.data() + (o * row_blocks + b.row_block) * inner + c0;
        for (int64_t c = 0; c < columns; ++c) slot[c] = acc[c];
      }
    }
  });
  if (row_blocks == 1) return;
  parallel_for(layout.outer * inner, kMemoryBoundGrain / row_blocks + 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const int64_t o = j / inner, c = j % inner;
      double acc = Op::kIdentity;
      for (int64_t rb = 0; rb < row_blocks; ++rb) {
        acc = Op::combine(acc, partial[static_cast<size_t>((o * row_blocks + rb) * inner + c)]);
      }
      out[j] = stored<T>(Op::finish(acc, count));
    }
  });
}

template <typename Op, typename T>
void run_reduce(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const ReduceLayout layout = *reduce_layout(x.shape(), ctx.attrs.get_ints("axes"), ctx.op.name.c_str());
  const T* px = static_cast<const T*>(x.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const int64_t count = layout.reduced;  // input elements per output element
  if (x.numel() == 0) {
    // Nothing to reduce: the identity, finished (the mean of nothing is NaN, as in the reference).
    std::fill(po, po + out.numel(), stored<T>(Op::finish(Op::kIdentity, count)));
    return;
  }
  if (layout.inner == 1) {
    reduce_rows<Op>(px, po, layout, count);
  } else {
    reduce_columns<Op>(px, po, layout, count);
  }
}

template <typename Op>
bool register_reduction(const char* op) {
  return register_kernel(
      op,
      {.name = "vectorized",
       .device = DeviceType::kCPU,
       .dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16},
       .priority = 50,
       .fn =
           [](KernelContext& ctx) {
             switch (ctx.inputs[0].dtype()) {
               case DType::kF32: return run_reduce<Op, float>(ctx);
               case DType::kF64: return run_reduce<Op, double>(ctx);
               case DType::kF16: return run_reduce<Op, Half>(ctx);
               default: return run_reduce<Op, BFloat16>(ctx);
             }
           },
       .supports =
           [](const KernelContext& ctx) {
             return reduce_layout(ctx.inputs[0].shape(), ctx.attrs.get_ints("axes"), ctx.op.name.c_str()).has_value();
           }});
}

const bool kRegistered = register_reduction<Sum>("sum") && register_reduction<Mean>("mean") &&
                         register_reduction<Max>("reduce_max") && register_reduction<Min>("reduce_min");

}  // namespace
}  // namespace nimbus::cpu
