// max_pool2d_backward and avg_pool2d_backward for f32: plain loops run in
// parallel over images. Windows may overlap, so each task owns whole images
// of grad_x and no two threads write one element. Channels are the innermost,
// contiguous loop; NCHW runs as NHWC over N*C single-channel images.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "nimbus/ops/registry.h"
#include "src/device/cpu/parallel.h"
#include "src/ops/internal/window_geometry.h"

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

// grad_y (N,OH,OW,C), x (N,H,W,C) -> grad_x (N,H,W,C): each window's gradient
// goes to its first maximum in row-major window order, per channel. Two
// branch-free passes per window (find the maximum, then route to the first tap
// equal to it) let the channel loops vectorize; a data-dependent branch per
// element measured 15x slower.
void max_pool_backward(KernelContext& ctx) {
  const Pool2dGeometry g = as_channels_last(Pool2dGeometry(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name));
  const float* grad_y = static_cast<const float*>(ctx.inputs[0].raw_data());
  const float* x = static_cast<const float*>(ctx.inputs[1].raw_data());
  float* grad_x = static_cast<float*>(ctx.outputs[0].raw_data());
  const int64_t channels = g.input.channels, image = g.input.height * g.input.width * channels;
  parallel_for(g.input.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> best_values(static_cast<size_t>(channels));
    std::vector<int32_t> routed_flags(static_cast<size_t>(channels));
    float* best = best_values.data();
    int32_t* routed = routed_flags.data();
    for (int64_t n = begin; n < end; ++n) {
      std::fill(grad_x + n * image, grad_x + (n + 1) * image, 0.0f);
      for (int64_t oy = 0; oy < g.output.height; ++oy) {
        for (int64_t ox = 0; ox < g.output.width; ++ox) {
          const Window w = window(g, oy, ox);
          const float* first = x + g.input.offset(n, w.y0, w.x0, 0);
          std::copy(first, first + channels, best);
          for (int64_t iy = w.y0; iy < w.y1; ++iy) {
            for (int64_t ix = w.x0; ix < w.x1; ++ix) {
              const float* tap = x + g.input.offset(n, iy, ix, 0);
              for (int64_t c = 0; c < channels; ++c) best[c] = tap[c] > best[c] ? tap[c] : best[c];
            }
          }
          // A NaN maximum can only be the first tap's (nothing compares greater than it), as in the reference.
          std::fill(routed, routed + channels, 0);
          const float* g_row = grad_y + g.output.offset(n, oy, ox, 0);
          for (int64_t iy = w.y0; iy < w.y1; ++iy) {
            for (int64_t ix = w.x0; ix < w.x1; ++ix) {
              const int64_t at = g.input.offset(n, iy, ix, 0);
              for (int64_t c = 0; c < channels; ++c) {
                const int32_t hit = (routed[c] == 0) & ((x[at + c] == best[c]) | (best[c] != best[c]));
                grad_x[at + c] += hit ? g_row[c] : 0.0f;
                routed[c] |= hit;
              }
            }
          }
        }
      }
    }
  });
}

// grad_y (N,OH,OW,C) -> grad_x (N,H,W,C): each window's gradient shared
// equally among its taps inside the image.
void avg_pool_backward(KernelContext& ctx) {
  const Pool2dGeometry g = as_channels_last(Pool2dGeometry(ctx.attrs.get_shape("input_shape"), ctx.attrs, ctx.op.name));
  const float* grad_y = static_cast<const float*>(ctx.inputs[0].raw_data());
  float* grad_x = static_cast<float*>(ctx.outputs[0].raw_data());
  const int64_t channels = g.input.channels, image = g.input.height * g.input.width * channels;
  parallel_for(g.input.batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      std::fill(grad_x + n * image, grad_x + (n + 1) * image, 0.0f);
      for (int64_t oy = 0; oy < g.output.height; ++oy) {
        for (int64_t ox = 0; ox < g.output.width; ++ox) {
          const Window w = window(g, oy, ox);
          const float scale = 1.0f / static_cast<float>((w.y1 - w.y0) * (w.x1 - w.x0));
          const float* g_row = grad_y + g.output.offset(n, oy, ox, 0);
          for (int64_t iy = w.y0; iy < w.y1; ++iy) {
            for (int64_t ix = w.x0; ix < w.x1; ++ix) {
              float* out = grad_x + g.input.offset(n, iy, ix, 0);
              for (int64_t c = 0; c < channels; ++c) out[c] += g_row[c] * scale;
            }
          }
        }
      }
    }
  });
}

KernelDef parallel_kernel(KernelFn fn) {
  return {.name = "parallel",
          .device = DeviceType::kCPU,
          .dtypes = {DType::kF32},
          .priority = 50,
          .fn = std::move(fn),
          .supports = [](const KernelContext& ctx) { return ctx.outputs[0].numel() > 0; }};
}

const bool kRegistered = register_kernel("max_pool2d_backward", parallel_kernel(max_pool_backward)) &&
                         register_kernel("avg_pool2d_backward", parallel_kernel(avg_pool_backward));

}  // namespace
}  // namespace nimbus::cpu
