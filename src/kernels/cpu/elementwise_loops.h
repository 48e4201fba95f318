// Loops shared by the vectorized elementwise kernels:
//   - map1 / map2: contiguous passes over vectors (32 bytes, or 64 in AVX-512
//     code) whose tail runs the same vector code on a padded copy, so an
//     element's result never depends on where a thread's range starts or ends;
//   - BroadcastLayout / for_each_row: any NumPy broadcast of up to N operands
//     as rows of the output in which every operand is either contiguous
//     (stride 1: same shape, row broadcast) or one repeated element (stride 0:
//     scalar, column broadcast). Adjacent axes that broadcast alike are merged
//     first, so (N,D)+(D) is N rows of D and (N,D)+(N,1) N rows with a scalar.
// An output may be the very buffer of an input (in-place updates): each vector
// is loaded before the same positions are stored. Internal.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "nimbus/base/shape.h"
#include "src/kernels/cpu/simd.h"

namespace nimbus::cpu {

// Outputs of memory-bound ops at least this large bypass the caches (streaming
// stores): they would not survive in the L2s or a VM's share of the L3 for the
// next op anyway, and skipping the read-for-ownership of each output line
// saves a quarter to a third of the memory traffic.
inline constexpr int64_t kStreamingStoreBytes = int64_t{8} << 20;

// Range boundaries for parallel_for that keep threads off each other's output lines.
template <typename T>
inline constexpr int64_t kCacheLineElements = static_cast<int64_t>(64 / sizeof(T));

// The loops below take the vector type V (simd::Vec<T> or simd::Vec<T, 64>)
// as their first template argument.
template <typename V>
using ElementOf = simd::Element<V>;

template <typename V>
NIMBUS_ALWAYS_INLINE V load_partial(const ElementOf<V>* p, int64_t count) {
  ElementOf<V> padded[simd::kLanesOf<V>] = {};
  std::memcpy(padded, p, static_cast<size_t>(count) * sizeof(ElementOf<V>));
  return simd::load<V>(padded);
}

template <typename V>
NIMBUS_ALWAYS_INLINE void store_partial(ElementOf<V>* p, V v, int64_t count) {
  ElementOf<V> padded[simd::kLanesOf<V>];
  simd::store(padded, v);
  std::memcpy(p, padded, static_cast<size_t>(count) * sizeof(ElementOf<V>));
}

// Runs body(i) -> vector for each full vector of [0, n) and stores it (streaming
// when asked, `out` is aligned for it and V is 32 bytes); returns where the full vectors end.
template <typename V, typename Body>
NIMBUS_ALWAYS_INLINE int64_t store_vectors(ElementOf<V>* out, int64_t n, bool streaming, Body body) {
  constexpr int64_t kLanes = simd::kLanesOf<V>;
  const int64_t full = n / kLanes * kLanes;
  if constexpr (sizeof(V) == simd::kVectorBytes) {
    if (streaming && reinterpret_cast<uintptr_t>(out) % simd::kVectorBytes == 0) {
      for (int64_t i = 0; i < full; i += kLanes) simd::stream(out + i, body(i));
      simd::stream_fence();
      return full;
    }
  }
  for (int64_t i = 0; i < full; i += kLanes) simd::store(out + i, body(i));
  return full;
}

// out[i] = f(x[i]) for i in [0, n); f maps a vector to a vector.
template <typename V, typename F>
NIMBUS_ALWAYS_INLINE void map1(const ElementOf<V>* x, ElementOf<V>* out, int64_t n, F f, bool streaming) {
  const int64_t full =
      store_vectors<V>(out, n, streaming, [&](int64_t i) NIMBUS_LAMBDA_INLINE { return f(simd::load<V>(x + i)); });
  if (full < n) store_partial(out + full, f(load_partial<V>(x + full, n - full)), n - full);
}

// Operand vector i of a map: a contiguous load (of `count` < lanes elements
// at the tail), or element 0 repeated when the operand's stride is 0.
template <int Stride, typename V>
NIMBUS_ALWAYS_INLINE V load_operand(const ElementOf<V>* p, int64_t i, int64_t count) {
  if constexpr (Stride == 0) {
    return simd::splat<V>(p[0]);
  } else {
    return count == simd::kLanesOf<V> ? simd::load<V>(p + i) : load_partial<V>(p + i, count);
  }
}

// out[i] = f(a[i * A], b[i * B]) for i in [0, n), A and B in {0, 1}.
template <int A, int B, typename V, typename F>
NIMBUS_ALWAYS_INLINE void map2(const ElementOf<V>* a, const ElementOf<V>* b, ElementOf<V>* out, int64_t n, F f,
                               bool streaming) {
  constexpr int64_t kLanes = simd::kLanesOf<V>;
  const int64_t full = store_vectors<V>(out, n, streaming, [&](int64_t i) NIMBUS_LAMBDA_INLINE {
    return f(load_operand<A, V>(a, i, kLanes), load_operand<B, V>(b, i, kLanes));
  });
  if (full < n) {
    const int64_t rest = n - full;
    store_partial(out + full, f(load_operand<A, V>(a, full, rest), load_operand<B, V>(b, full, rest)), rest);
  }
}

// The output's axes, with size-1 axes dropped and adjacent axes merged where
// every operand steps through them alike. At least one axis (of size 1 for a
// single-element output); the innermost stride of each operand is 0 or 1.
template <size_t N>
struct BroadcastLayout {
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<std::array<int64_t, kMaxRank>, N> strides{};  // in elements, per operand

  int64_t inner() const { return dims[static_cast<size_t>(rank - 1)]; }
  int64_t inner_stride(size_t operand) const { return strides[operand][static_cast<size_t>(rank - 1)]; }
};

template <size_t N>
BroadcastLayout<N> broadcast_layout(const Shape& out, const std::array<const Shape*, N>& operands) {
  BroadcastLayout<N> layout;
  std::array<std::array<int64_t, kMaxRank>, N> operand_strides;
  for (size_t k = 0; k < N; ++k) operand_strides[k] = operands[k]->strides();
  for (int axis = 0; axis < out.rank(); ++axis) {
    const int64_t dim = out.dims()[axis];
    if (dim == 1) continue;
    std::array<int64_t, N> stride{};
    for (size_t k = 0; k < N; ++k) {
      const int operand_axis = axis - (out.rank() - operands[k]->rank());
      if (operand_axis >= 0 && operands[k]->dims()[operand_axis] != 1) stride[k] = operand_strides[k][operand_axis];
    }
    bool merge = layout.rank > 0;
    for (size_t k = 0; k < N && merge; ++k) {
      merge = layout.strides[k][static_cast<size_t>(layout.rank - 1)] == stride[k] * dim;
    }
    const size_t slot = static_cast<size_t>(merge ? layout.rank - 1 : layout.rank);
    layout.dims[slot] = merge ? layout.dims[slot] * dim : dim;
    for (size_t k = 0; k < N; ++k) layout.strides[k][slot] = stride[k];
    if (!merge) ++layout.rank;
  }
  if (layout.rank == 0) {
    layout.rank = 1;
    layout.dims[0] = 1;
  }
  return layout;
}

// Calls row(offsets, out_offset, count) for each piece of the flat output range
// [begin, end) that lies within one innermost row; offsets[k] is where operand k's
// elements for that piece start.
template <size_t N, typename Row>
void for_each_row(const BroadcastLayout<N>& layout, int64_t begin, int64_t end, Row row) {
  const int outer_rank = layout.rank - 1;
  const int64_t inner = layout.inner();
  std::array<int64_t, kMaxRank> index{};
  int64_t rest = begin / inner;
  int64_t column = begin % inner;
  for (int axis = outer_rank - 1; axis >= 0; --axis) {
    const size_t a = static_cast<size_t>(axis);
    index[a] = rest % layout.dims[a];
    rest /= layout.dims[a];
  }
  std::array<int64_t, N> base{};
  for (size_t k = 0; k < N; ++k) {
    for (int axis = 0; axis < outer_rank; ++axis) {
      base[k] += index[static_cast<size_t>(axis)] * layout.strides[k][static_cast<size_t>(axis)];
    }
  }
  std::array<int64_t, N> offsets;
  for (int64_t position = begin; position < end;) {
    const int64_t count = std::min(inner - column, end - position);
    for (size_t k = 0; k < N; ++k) offsets[k] = base[k] + column * layout.inner_stride(k);
    row(offsets, position, count);
    position += count;
    column = 0;
    // Advance the outer index like an odometer.
    for (int axis = outer_rank - 1; axis >= 0; --axis) {
      const size_t a = static_cast<size_t>(axis);
      for (size_t k = 0; k < N; ++k) base[k] += layout.strides[k][a];
      if (++index[a] < layout.dims[a]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= layout.strides[k][a] * layout.dims[a];
      index[a] = 0;
    }
  }
}

}  // namespace nimbus::cpu
