// Vectorized, multithreaded binary elementwise kernels with broadcasting:
//   add, sub, mul, maximum, minimum   f32, f64, i32, i64
//   div                               f32, f64
//   equal, not_equal, less, less_equal, greater, greater_equal   f32, f64, i32, i64 -> bool
//   where(cond, a, b)                 a, b f32, f64, i32, i64; cond bool
// Layouts: any NumPy broadcast. After merging axes (elementwise_loops.h) the
// fast paths are: same shape (one contiguous pass), a scalar on either side,
// row broadcast (N,D)+(D) and column broadcast (N,D)+(N,1) (rows with a
// contiguous or a repeated operand), and the generic broadcast as rows of
// the same kinds. Results equal the reference kernels' exactly (same
// expressions, including NaN and signed-zero behaviour of maximum/minimum).
#include <bit>
#include <cstdint>
#include <type_traits>

#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/elementwise_loops.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

template <typename T, typename F>
void run_binary(KernelContext& ctx, F f) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const auto layout = broadcast_layout<2>(out.shape(), {&a.shape(), &b.shape()});
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const bool streaming = n * static_cast<int64_t>(sizeof(T)) >= kStreamingStoreBytes;
  const int64_t stride_a = layout.inner_stride(0), stride_b = layout.inner_stride(1);
  parallel_for(
      n, kMemoryBoundGrain,
      [&](int64_t begin, int64_t end) {
        for_each_row(layout, begin, end, [&](const std::array<int64_t, 2>& at, int64_t o, int64_t count) {
          const T* ra = pa + at[0];
          const T* rb = pb + at[1];
          if (stride_a == 1 && stride_b == 1) {
            map2<1, 1, simd::Vec<T>>(ra, rb, po + o, count, f, streaming);
          } else if (stride_a == 1) {
            map2<1, 0, simd::Vec<T>>(ra, rb, po + o, count, f, streaming);
          } else if (stride_b == 1) {
            map2<0, 1, simd::Vec<T>>(ra, rb, po + o, count, f, streaming);
          } else {
            map2<0, 0, simd::Vec<T>>(ra, rb, po + o, count, f, streaming);
          }
        });
      },
      kCacheLineElements<T>);
}

constexpr DType kArithmeticDTypes[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};

// Calls fn.template operator()<T>() for the dtypes of kArithmeticDTypes.
template <typename Fn>
void visit_arithmetic(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kI64: return fn.template operator()<int64_t>();
    default: NIMBUS_ASSERT(false) << "vectorized elementwise kernel called for " << dtype_name(dtype);
  }
}

// `f` is a generic lambda: one expression for the vectors of every dtype.
template <typename F>
bool register_binary(const char* op, const std::vector<DType>& dtypes, F f) {
  return register_kernel(op, {.name = "vectorized",
                              .device = DeviceType::kCPU,
                              .dtypes = dtypes,
                              .priority = 50,
                              .fn = [f](KernelContext& ctx) {
                                visit_arithmetic(ctx.inputs[0].dtype(), [&]<typename T>() { run_binary<T>(ctx, f); });
                              }});
}

const std::vector<DType> kAll(std::begin(kArithmeticDTypes), std::end(kArithmeticDTypes));
const std::vector<DType> kFloating = {DType::kF32, DType::kF64};

const bool kRegistered = register_binary("add", kAll, [](auto a, auto b) { return a + b; }) &&
                         register_binary("sub", kAll, [](auto a, auto b) { return a - b; }) &&
                         register_binary("mul", kAll, [](auto a, auto b) { return a * b; }) &&
                         register_binary("div", kFloating, [](auto a, auto b) { return a / b; }) &&
                         // As the reference: a NaN in either input gives NaN (a != a only for NaN).
                         register_binary("maximum", kAll, [](auto a, auto b) { return (a >= b) | (a != a) ? a : b; }) &&
                         register_binary("minimum", kAll, [](auto a, auto b) { return (a <= b) | (a != a) ? a : b; });

// ---- comparisons: T, T -> bool ----

template <int A, int B, typename T, typename F>
void compare_row(const T* a, const T* b, bool* out, int64_t n, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i * A], b[i * B]);
}

template <typename T, typename F>
void run_comparison(KernelContext& ctx, F f) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const auto layout = broadcast_layout<2>(out.shape(), {&a.shape(), &b.shape()});
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  bool* po = static_cast<bool*>(out.raw_data());
  const int64_t stride_a = layout.inner_stride(0), stride_b = layout.inner_stride(1);
  parallel_for(
      n, kMemoryBoundGrain,
      [&](int64_t begin, int64_t end) {
        for_each_row(layout, begin, end, [&](const std::array<int64_t, 2>& at, int64_t o, int64_t count) {
          const T* ra = pa + at[0];
          const T* rb = pb + at[1];
          if (stride_a == 1 && stride_b == 1) {
            compare_row<1, 1>(ra, rb, po + o, count, f);
          } else if (stride_a == 1) {
            compare_row<1, 0>(ra, rb, po + o, count, f);
          } else if (stride_b == 1) {
            compare_row<0, 1>(ra, rb, po + o, count, f);
          } else {
            compare_row<0, 0>(ra, rb, po + o, count, f);
          }
        });
      },
      kCacheLineElements<bool>);
}

template <typename F>
bool register_comparison(const char* op, F f) {
  return register_kernel(
      op,
      {.name = "vectorized", .device = DeviceType::kCPU, .dtypes = kAll, .priority = 50, .fn = [f](KernelContext& ctx) {
         visit_arithmetic(ctx.inputs[0].dtype(), [&]<typename T>() { run_comparison<T>(ctx, f); });
       }});
}

const bool kComparisonsRegistered = register_comparison("equal", [](auto a, auto b) { return a == b; }) &&
                                    register_comparison("not_equal", [](auto a, auto b) { return a != b; }) &&
                                    register_comparison("less", [](auto a, auto b) { return a < b; }) &&
                                    register_comparison("less_equal", [](auto a, auto b) { return a <= b; }) &&
                                    register_comparison("greater", [](auto a, auto b) { return a > b; }) &&
                                    register_comparison("greater_equal", [](auto a, auto b) { return a >= b; });

// ---- where(cond, a, b) ----

// As bits under a mask, all ones where cond holds: `cond ? a : b` would compile to a branch per element
// (a relu gradient's mask is as good as random), the mask to vector ands.
template <int C, int A, int B, typename T>
void select_row(const bool* cond, const T* a, const T* b, T* out, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(T) == sizeof(Bits));
  const auto* flags = reinterpret_cast<const uint8_t*>(cond);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const Bits mask = Bits{0} - Bits{flags[i * C]};
    out[i] = std::bit_cast<T>(
        static_cast<Bits>((std::bit_cast<Bits>(a[i * A]) & mask) | (std::bit_cast<Bits>(b[i * B]) & ~mask)));
  }
}

// The row function for each combination of inner strides (cond, a, b), indexed by 4 C + 2 A + B.
template <typename T>
using SelectRow = void (*)(const bool*, const T*, const T*, T*, int64_t);
template <typename T>
constexpr SelectRow<T> kSelectRows[8] = {select_row<0, 0, 0, T>, select_row<0, 0, 1, T>, select_row<0, 1, 0, T>,
                                         select_row<0, 1, 1, T>, select_row<1, 0, 0, T>, select_row<1, 0, 1, T>,
                                         select_row<1, 1, 0, T>, select_row<1, 1, 1, T>};

template <typename T>
void run_where(KernelContext& ctx) {
  const Tensor& cond = ctx.inputs[0];
  const Tensor& a = ctx.inputs[1];
  const Tensor& b = ctx.inputs[2];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const auto layout = broadcast_layout<3>(out.shape(), {&cond.shape(), &a.shape(), &b.shape()});
  const bool* pc = static_cast<const bool*>(cond.raw_data());
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const SelectRow<T> row_fn =
      kSelectRows<T>[4 * layout.inner_stride(0) + 2 * layout.inner_stride(1) + layout.inner_stride(2)];
  parallel_for(
      n, kMemoryBoundGrain,
      [&](int64_t begin, int64_t end) {
        for_each_row(layout, begin, end, [&](const std::array<int64_t, 3>& at, int64_t o, int64_t count) {
          row_fn(pc + at[0], pa + at[1], pb + at[2], po + o, count);
        });
      },
      kCacheLineElements<T>);
}

const bool kWhereRegistered = register_kernel(
    "where",
    {.name = "vectorized", .device = DeviceType::kCPU, .dtypes = kAll, .priority = 50, .fn = [](KernelContext& ctx) {
       visit_arithmetic(ctx.inputs[1].dtype(), [&]<typename T>() { run_where<T>(ctx); });
     }});

}  // namespace
}  // namespace nimbus::cpu
