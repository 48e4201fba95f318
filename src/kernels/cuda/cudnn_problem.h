// What a cuDNN convolution or pooling call is, from the ops' geometry
// (nimbus/ops/for_kernels/window_geometry.h), in cuDNN's terms: NCHW-ordered
// dimensions (cuDNN's descriptors always list n, c, h, w; the format says how
// they are stored), symmetric paddings, and the filter as cuDNN wants it.
// Pure host code with no cuDNN types, so the CPU tests check it; a problem is
// also the key of the algorithm cache (cudnn_convolution.cc).
//
// nullopt when cuDNN cannot express the call: TF's "same" padding puts the odd
// padded row or column after the input (a stride-2 window over an even size),
// and cuDNN's legacy descriptors pad both sides alike. Those calls keep our
// direct kernels (window_ops.cc).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>

#include "nimbus/base/dtype.h"
#include "nimbus/ops/for_kernels/window_geometry.h"

namespace nimbus::cuda {

// n, c, h, w of an image batch, or k, c / groups, r, s of a filter.
using Dims4 = std::array<int64_t, 4>;

struct ConvProblem {
  DType dtype = DType::kF32;
  bool channels_last = true;  // NHWC images and a KRSC filter (cuDNN's NHWC filter); else NCHW and KCRS
  bool tf32 = false;          // f32 may use TF32 Tensor Cores (tf32.h)
  Dims4 x{}, filter{}, y{};
  std::array<int64_t, 2> pad{}, stride{}, dilation{};
  int64_t groups = 1;
  auto operator<=>(const ConvProblem&) const =
      default;  // NOLINT(modernize-use-nullptr): the defaulted <=> compares with a literal 0
};

struct PoolProblem {
  DType dtype = DType::kF32;
  bool channels_last = true;
  Dims4 x{}, y{};
  std::array<int64_t, 2> window{}, pad{}, stride{};
  auto operator<=>(const PoolProblem&) const = default;
};

inline Dims4 nchw_dims(const internal::ImageLayout& image) {
  return {image.batch, image.channels, image.height, image.width};
}

// Both sides padded alike, as cuDNN's legacy descriptors require.
inline bool symmetric(const internal::WindowAxis& axis) { return axis.pad_before == axis.pad_after; }

inline std::optional<ConvProblem> conv_problem(const internal::Conv2dGeometry& g, DType dtype, bool tf32) {
  if (!symmetric(g.rows) || !symmetric(g.cols)) return std::nullopt;
  return ConvProblem{.dtype = dtype,
                     .channels_last = g.channels_last,
                     .tf32 = dtype == DType::kF32 && tf32,
                     .x = nchw_dims(g.input),
                     .filter = {g.filters, g.filter_channels, g.kernel_h, g.kernel_w},
                     .y = nchw_dims(g.output),
                     .pad = {g.rows.pad_before, g.cols.pad_before},
                     .stride = {g.rows.stride, g.cols.stride},
                     .dilation = {g.rows.dilation, g.cols.dilation},
                     .groups = g.groups};
}

inline std::optional<PoolProblem> pool_problem(const internal::Pool2dGeometry& g, DType dtype) {
  if (!symmetric(g.rows) || !symmetric(g.cols)) return std::nullopt;
  return PoolProblem{.dtype = dtype,
                     .channels_last = g.input.channels_last,
                     .x = nchw_dims(g.input),
                     .y = nchw_dims(g.output),
                     .window = {g.rows.kernel, g.cols.kernel},
                     .pad = {g.rows.pad_before, g.cols.pad_before},
                     .stride = {g.rows.stride, g.cols.stride}};
}

// Our NHWC filter is TF's (KH, KW, C / groups, F); cuDNN's NHWC filter is (F, KH, KW, C / groups).
// Both are row-major matrices of the other's transpose: (KH * KW * C / groups) x F against F x (KH * KW * C / groups).
struct FilterTranspose {
  int64_t taps = 0;     // KH * KW * C / groups: one filter's elements
  int64_t filters = 0;  // F
};
inline FilterTranspose filter_transpose(const ConvProblem& p) {
  return {.taps = p.filter[1] * p.filter[2] * p.filter[3], .filters = p.filter[0]};
}

}  // namespace nimbus::cuda
