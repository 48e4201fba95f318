// max_pool2d_backward, max_pool2d_relu_backward and avg_pool2d_backward for f32: plain loops run in
// parallel over images; f16 and bf16 run the same f32 loops on each image
// widened into per-thread buffers, and round each grad_x image once. Windows may overlap, so each task owns whole
// images of grad_x and no two threads write one element. Channels are the innermost, contiguous loop; NCHW runs as NHWC
// over N*C single-channel images.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/half_convert.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

using internal::ImageLayout;
using internal::Pool2dGeometry;

// The geometry with NCHW planes recast as single-channel NHWC images.
Pool2dGeometry as_channels_last(Pool2dGeometry g) {
  if (!g.input.channels_last) {
    for (ImageLayout* image : {&g.input, &g.output}) {
      *image = ImageLayout{image->batch * image->channels, image->height, image->width, 1, true};
    }
  }
  return g;
}

// The valid taps of output (oy, ox): rows [y0, y1), cols [x0, x1) of the image.
struct Window {
  int64_t y0, y1, x0, x1;
};
Window window(const Pool2dGeometry& g, int64_t oy, int64_t ox) {
  const auto clamp = [](int64_t v, int64_t size) { return std::clamp<int64_t>(v, 0, size); };
  const int64_t y = g.rows.input_index(oy, 0), x = g.cols.input_index(ox, 0);
  return {clamp(y, g.input.height), clamp(y + g.rows.kernel, g.input.height), clamp(x, g.input.width),
          clamp(x + g.cols.kernel, g.input.width)};
}

// One image of a tensor as f32: the image itself, or for f16 and bf16 widened into `buffer`.
template <typename T>
const float* image_as_f32(const T* image, int64_t size, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return image;
  } else {
    buffer.resize(static_cast<size_t>(size));
    widen(image, buffer.data(), size);
    return buffer.data();
  }
}

// Whether the windows tile the image: every element lies in exactly one window (stride = kernel, and the
// windows reach both edges), so a backward pass can write each element once instead of zeroing the image and
// adding into it.
bool windows_tile_image(const Pool2dGeometry& g) {
  const auto tiles = [](const internal::WindowAxis& axis, int64_t size) {
    return axis.stride == axis.kernel && axis.dilation == 1 && axis.input_index(0, 0) <= 0 &&
           axis.input_index(axis.output, 0) >= size;
  };
  return tiles(g.rows, g.input.height) && tiles(g.cols, g.input.width);
}

// Runs body(n, grad_y image, x image, grad_x image) in f32 for each image n, in parallel over images, with grad_x
// zeroed first unless `writes_every_element`. For f16 and bf16 each image is widened into per-thread buffers
// (they stay in cache) and grad_x is rounded once.
template <typename T, typename Body>
void for_each_image_in_f32(const Pool2dGeometry& g, const Tensor& grad_y, const Tensor* x, Tensor& grad_x,
                           bool writes_every_element, Body body) {
  const int64_t image = g.input.height * g.input.width * g.input.channels;
  const int64_t output_image = g.output.height * g.output.width * g.output.channels;
  const T* grad_y_data = static_cast<const T*>(grad_y.raw_data());
  const T* x_data = x != nullptr ? static_cast<const T*>(x->raw_data()) : nullptr;
  T* grad_x_data = static_cast<T*>(grad_x.raw_data());
  parallel_for(g.input.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> grad_y_buffer, x_buffer, grad_x_buffer;
    for (int64_t n = begin; n < end; ++n) {
      const float* grad_y_image = image_as_f32(grad_y_data + n * output_image, output_image, grad_y_buffer);
      const float* x_image = x_data != nullptr ? image_as_f32(x_data + n * image, image, x_buffer) : nullptr;
      float* grad_x_image;
      if constexpr (std::is_same_v<T, float>) {
        grad_x_image = grad_x_data + n * image;
      } else {
        grad_x_buffer.resize(static_cast<size_t>(image));
        grad_x_image = grad_x_buffer.data();
      }
      if (!writes_every_element) std::fill(grad_x_image, grad_x_image + image, 0.0f);
      body(n, grad_y_image, x_image, grad_x_image);
      if constexpr (!std::is_same_v<T, float>) narrow(grad_x_image, grad_x_data + n * image, image);
    }
  });
}

// One window's backward step over all channels: its gradient g_row goes to the window's first maximum in
// row-major window order, per channel; with kThroughRelu only where that maximum is positive (relu's
// gradient, for x a ReLU's output). With kAssign (the windows tile the image) the taps are written, else
// added to. Two branch-free passes (find the maximum, then route to the first tap equal to it) let the
// channel loops vectorize; a data-dependent branch per element measured 15x slower.
template <bool kAssign, bool kThroughRelu, typename TapOffset>
void route_window(const Window& w, int64_t channels, TapOffset tap_offset, const float* x, const float* g_row,
                  float* grad_x, float* best, int32_t* routed) {
  const float* first = x + tap_offset(w.y0, w.x0);
  std::copy(first, first + channels, best);
  for (int64_t iy = w.y0; iy < w.y1; ++iy) {
    for (int64_t ix = w.x0; ix < w.x1; ++ix) {
      const float* tap = x + tap_offset(iy, ix);
      for (int64_t c = 0; c < channels; ++c) best[c] = tap[c] > best[c] ? tap[c] : best[c];
    }
  }
  // A NaN maximum can only be the first tap's (nothing compares greater than it), as in the reference.
  std::fill(routed, routed + channels, 0);
  for (int64_t iy = w.y0; iy < w.y1; ++iy) {
    for (int64_t ix = w.x0; ix < w.x1; ++ix) {
      const int64_t at = tap_offset(iy, ix);
      for (int64_t c = 0; c < channels; ++c) {
        const int32_t hit = (routed[c] == 0) & ((x[at + c] == best[c]) | (best[c] != best[c]));
        routed[c] |= hit;
        const int32_t passes = kThroughRelu ? hit & (x[at + c] > 0.0f) : hit;
        const float value = passes ? g_row[c] : 0.0f;
        if constexpr (kAssign) {
          grad_x[at + c] = value;
        } else {
          grad_x[at + c] += value;
        }
      }
    }
  }
}

// Adds each channel of an (H*W, channels) f32 image into image_sums (channels), in f32 (one image's terms)
// while the image is in cache.
void sum_channels(const float* image, int64_t pixels, int64_t channels, double* image_sums) {
  thread_local std::vector<float> totals;
  totals.assign(static_cast<size_t>(channels), 0.0f);
  for (int64_t p = 0; p < pixels; ++p) {
    const float* row = image + p * channels;
    for (int64_t c = 0; c < channels; ++c) totals[static_cast<size_t>(c)] += row[c];
  }
  for (int64_t c = 0; c < channels; ++c) image_sums[c] = totals[static_cast<size_t>(c)];
}

// grad_y (N,OH,OW,C), x (N,H,W,C) -> grad_x (N,H,W,C) (route_window for each window). Windows that tile the
// image write grad_x once; others zero it first and add. With kThroughRelu also grad_x summed per channel (C):
// f32 within an image, then f64 over the images in order (the same sums for any number of threads).
template <typename T, bool kThroughRelu>
void max_pool_backward(KernelContext& ctx) {
  const Pool2dGeometry given(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  const Pool2dGeometry g = as_channels_last(given);
  const int64_t channels = g.input.channels;
  const bool tiled = windows_tile_image(g);
  std::vector<double> image_sums(kThroughRelu ? static_cast<size_t>(g.input.batch * channels) : 0);
  // Offsets within one image.
  const auto in_at = [&](int64_t y, int64_t x) { return g.input.offset(0, y, x, 0); };
  for_each_image_in_f32<T>(g, ctx.inputs[0], &ctx.inputs[1], ctx.outputs[0], tiled,
                           [&](int64_t n, const float* grad_y, const float* x, float* grad_x) {
                             thread_local std::vector<float> best_values;
                             thread_local std::vector<int32_t> routed_flags;
                             best_values.resize(static_cast<size_t>(channels));
                             routed_flags.resize(static_cast<size_t>(channels));
                             for (int64_t oy = 0; oy < g.output.height; ++oy) {
                               for (int64_t ox = 0; ox < g.output.width; ++ox) {
                                 const Window w = window(g, oy, ox);
                                 const float* g_row = grad_y + g.output.offset(0, oy, ox, 0);
                                 if (tiled) {
                                   route_window<true, kThroughRelu>(w, channels, in_at, x, g_row, grad_x,
                                                                    best_values.data(), routed_flags.data());
                                 } else {
                                   route_window<false, kThroughRelu>(w, channels, in_at, x, g_row, grad_x,
                                                                     best_values.data(), routed_flags.data());
                                 }
                               }
                             }
                             if constexpr (kThroughRelu) {
                               sum_channels(grad_x, g.input.height * g.input.width, channels,
                                            image_sums.data() + n * channels);
                             }
                           });
  if constexpr (kThroughRelu) {
    // NCHW ran as N*C single-channel images: image n*C + c holds channel c.
    const int64_t images = given.input.batch, per_image = given.input.channels;
    std::vector<double> channel_sums(static_cast<size_t>(per_image), 0.0);
    for (int64_t n = 0; n < images; ++n) {
      for (int64_t c = 0; c < per_image; ++c)
        channel_sums[static_cast<size_t>(c)] += image_sums[static_cast<size_t>(n * per_image + c)];
    }
    const std::vector<float> rounded(channel_sums.begin(), channel_sums.end());
    T* sums = static_cast<T*>(ctx.outputs[1].raw_data());
    if constexpr (std::is_same_v<T, float>) {
      std::copy(rounded.begin(), rounded.end(), sums);
    } else {
      narrow(rounded.data(), sums, per_image);
    }
  }
}

// grad_y (N,OH,OW,C) -> grad_x (N,H,W,C): each window's gradient shared
// equally among its taps inside the image.
template <typename T>
void avg_pool_backward(KernelContext& ctx) {
  const Pool2dGeometry g = as_channels_last(Pool2dGeometry(ctx.attrs.get_shape("input_shape"), ctx.attrs, ctx.op.name));
  const int64_t channels = g.input.channels;
  for_each_image_in_f32<T>(g, ctx.inputs[0], nullptr, ctx.outputs[0], /*writes_every_element=*/false,
                           [&](int64_t, const float* grad_y, const float*, float* grad_x) {
                             for (int64_t oy = 0; oy < g.output.height; ++oy) {
                               for (int64_t ox = 0; ox < g.output.width; ++ox) {
                                 const Window w = window(g, oy, ox);
                                 const float scale = 1.0f / static_cast<float>((w.y1 - w.y0) * (w.x1 - w.x0));
                                 const float* g_row = grad_y + g.output.offset(0, oy, ox, 0);
                                 for (int64_t iy = w.y0; iy < w.y1; ++iy) {
                                   for (int64_t ix = w.x0; ix < w.x1; ++ix) {
                                     float* out = grad_x + g.input.offset(0, iy, ix, 0);
                                     for (int64_t c = 0; c < channels; ++c) out[c] += g_row[c] * scale;
                                   }
                                 }
                               }
                             }
                           });
}

// f32, and f16 and bf16 through per-image f32 buffers.
template <template <typename> typename Kernel>
KernelDef parallel_kernel() {
  return {.name = "parallel",
          .device = DeviceType::kCPU,
          .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
          .priority = 50,
          .fn =
              [](KernelContext& ctx) {
                switch (ctx.outputs[0].dtype()) {
                  case DType::kF16: return Kernel<Half>::run(ctx);
                  case DType::kBF16: return Kernel<BFloat16>::run(ctx);
                  default: return Kernel<float>::run(ctx);
                }
              },
          .supports = [](const KernelContext& ctx) { return ctx.outputs[0].numel() > 0; }};
}

template <typename T>
struct MaxPoolBackward {
  static void run(KernelContext& ctx) { max_pool_backward<T, false>(ctx); }
};
template <typename T>
struct MaxPoolReluBackward {
  static void run(KernelContext& ctx) { max_pool_backward<T, true>(ctx); }
};
template <typename T>
struct AvgPoolBackward {
  static void run(KernelContext& ctx) { avg_pool_backward<T>(ctx); }
};

const bool kRegistered = register_kernel("max_pool2d_backward", parallel_kernel<MaxPoolBackward>()) &&
                         register_kernel("max_pool2d_relu_backward", parallel_kernel<MaxPoolReluBackward>()) &&
                         register_kernel("avg_pool2d_backward", parallel_kernel<AvgPoolBackward>());

}  // namespace
}  // namespace nimbus::cpu
