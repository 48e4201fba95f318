// Helpers shared by reference kernels: compute types, broadcast indexing and
// the output views kernels write through. Shared with the kernels (src/kernels/).
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "nimbus/base/dtype.h"
#include "nimbus/base/shape.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::internal {

// Arithmetic on 16-bit floats happens in f32.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
inline compute_t<T> load(const T& value) {
  return static_cast<compute_t<T>>(value);
}
template <typename T>
inline T store(compute_t<T> value) {
  return static_cast<T>(value);
}

// Strides (in elements) of `in` seen through broadcasting to `out`: zero on
// axes that `in` lacks or has as size 1. Indexed by `out`'s axes.
inline std::array<int64_t, kMaxRank> broadcast_strides(const Shape& in, const Shape& out) {
  std::array<int64_t, kMaxRank> result{};
  const auto in_strides = in.strides();
  const int offset = out.rank() - in.rank();
  for (int axis = 0; axis < out.rank(); ++axis) {
    const int in_axis = axis - offset;
    if (in_axis >= 0 && in.dims()[in_axis] != 1) result[axis] = in_strides[in_axis];
  }
  return result;
}

// The element offset in a broadcast input for flat output index `flat`.
inline int64_t broadcast_offset(int64_t flat, const Shape& out, const std::array<int64_t, kMaxRank>& strides) {
  int64_t offset = 0;
  for (int axis = out.rank() - 1; axis >= 0; --axis) {
    const int64_t dim = out.dims()[axis];
    offset += (flat % dim) * strides[axis];
    flat /= dim;
  }
  return offset;
}

// out[i] = f(a[bcast(i)], b[bcast(i)]) in the plainest possible loop.
template <typename In, typename Out, typename F>
void reference_binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const In* pa = static_cast<const In*>(a.raw_data());
  const In* pb = static_cast<const In*>(b.raw_data());
  Out* po = static_cast<Out*>(out.raw_data());
  const auto sa = broadcast_strides(a.shape(), out.shape());
  const auto sb = broadcast_strides(b.shape(), out.shape());
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    po[i] = f(pa[broadcast_offset(i, out.shape(), sa)], pb[broadcast_offset(i, out.shape(), sb)]);
  }
}

// out[i] = f(x[i]).
template <typename In, typename Out, typename F>
void reference_unary(const Tensor& x, Tensor& out, F f) {
  const In* px = static_cast<const In*>(x.raw_data());
  Out* po = static_cast<Out*>(out.raw_data());
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = f(px[i]);
}

}  // namespace nimbus::internal
