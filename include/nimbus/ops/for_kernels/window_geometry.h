// The geometry of sliding-window ops (conv2d, pooling): output sizes and
// paddings by TF's "valid" / "same" rules, and where each element of an
// image batch, a filter and an output lives in memory for data_format NHWC
// or NCHW. The constructors validate shapes and attributes and throw
// InvalidArgument naming the op, so shape rules and kernels share one
// source of truth. Shared with the kernels (src/kernels/).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/base/shape.h"
#include "nimbus/ops/attrs.h"

namespace nimbus::internal {

// One spatial axis of a window sliding over an input.
struct WindowAxis {
  int64_t input = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t output = 0;
  int64_t pad_before = 0;
  int64_t pad_after = 0;

  int64_t extent() const { return (kernel - 1) * dilation + 1; }
  // The input coordinate that tap k of output o reads; outside [0, input) it is padding.
  int64_t input_index(int64_t o, int64_t k) const { return o * stride - pad_before + k * dilation; }
};

// TF's rules. "valid": no padding, out = floor((in - extent) / stride) + 1.
// "same": out = ceil(in / stride), pad_total = max((out - 1) * stride + extent - in, 0),
// pad_before = pad_total / 2 (the extra element, if any, goes after).
inline WindowAxis window_axis(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, bool same) {
  WindowAxis axis{.input = input, .kernel = kernel, .stride = stride, .dilation = dilation};
  if (same) {
    axis.output = (input + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((axis.output - 1) * stride + axis.extent() - input, 0);
    axis.pad_before = total / 2;
    axis.pad_after = total - axis.pad_before;
  } else {
    axis.output = input >= axis.extent() ? (input - axis.extent()) / stride + 1 : 0;
  }
  return axis;
}

// Element offsets in a batch of images (N, H, W, C) stored as NHWC or NCHW.
struct ImageLayout {
  int64_t batch = 0, height = 0, width = 0, channels = 0;
  bool channels_last = true;

  int64_t offset(int64_t n, int64_t y, int64_t x, int64_t c) const {
    return channels_last ? ((n * height + y) * width + x) * channels + c
                         : ((n * channels + c) * height + y) * width + x;
  }
  Shape shape() const {
    return channels_last ? Shape{batch, height, width, channels} : Shape{batch, channels, height, width};
  }
  int64_t numel() const { return batch * height * width * channels; }
};

// "NHWC" -> true, "NCHW" -> false; anything else is the caller's error.
inline bool parse_channels_last(const std::string& data_format, const std::string& op) {
  if (data_format == "NHWC") return true;
  if (data_format == "NCHW") return false;
  throw InvalidArgument(fmt::format("{}: data_format \"{}\" is not supported", op, data_format),
                        "use \"NHWC\" (Keras's default) or \"NCHW\" (PyTorch's)");
}

// "same" -> true, "valid" -> false.
inline bool parse_same_padding(const std::string& padding, const std::string& op) {
  if (padding == "same") return true;
  if (padding == "valid") return false;
  throw InvalidArgument(fmt::format("{}: padding \"{}\" is not supported", op, padding), "use \"valid\" or \"same\"");
}

// Two positive integers (strides, dilations, pool_size).
inline std::array<int64_t, 2> positive_pair(const Attrs& attrs, const char* name, const std::string& op) {
  const std::vector<int64_t>& values = attrs.get_ints(name);
  if (values.size() != 2 || values[0] < 1 || values[1] < 1) {
    throw InvalidArgument(
        fmt::format("{}: {} is [{}], two positive integers are required", op, name, fmt::join(values, ", ")));
  }
  return {values[0], values[1]};
}

// A batch of images: (N, H, W, C) for NHWC, (N, C, H, W) for NCHW.
inline ImageLayout image_layout(const Shape& shape, bool channels_last, const std::string& op, const char* what) {
  if (shape.rank() != 4) {
    throw InvalidArgument(fmt::format("{}: {} has shape {} (rank {}), a batch of images {} is required", op, what,
                                      shape.to_string(), shape.rank(), channels_last ? "(N, H, W, C)" : "(N, C, H, W)"),
                          fmt::format("data_format is {}; add a batch axis with expand_dims(x, 0) or a channel axis "
                                      "of size 1 for grayscale images",
                                      channels_last ? "NHWC" : "NCHW"));
  }
  const auto d = shape.dims();
  return channels_last ? ImageLayout{d[0], d[1], d[2], d[3], true} : ImageLayout{d[0], d[2], d[3], d[1], false};
}

// conv2d of x (input_shape) with a filter (filter_shape) under conv2d's attributes:
// strides, padding, dilations, groups, data_format.
struct Conv2dGeometry {
  Conv2dGeometry(const Shape& input_shape, const Shape& filter_shape, const Attrs& attrs, const std::string& op) {
    channels_last = parse_channels_last(attrs.get_string("data_format"), op);
    const bool same = parse_same_padding(attrs.get_string("padding"), op);
    const auto strides = positive_pair(attrs, "strides", op);
    const auto dilations = positive_pair(attrs, "dilations", op);
    groups = attrs.get_int("groups");
    input = image_layout(input_shape, channels_last, op, "input x");
    const char* filter_layout = channels_last ? "(KH, KW, C/groups, F)" : "(F, C/groups, KH, KW)";
    if (filter_shape.rank() != 4) {
      throw InvalidArgument(fmt::format("{}: filter has shape {} (rank {}); with data_format {} it must be {}", op,
                                        filter_shape.to_string(), filter_shape.rank(), channels_last ? "NHWC" : "NCHW",
                                        filter_layout));
    }
    const auto f = filter_shape.dims();
    kernel_h = channels_last ? f[0] : f[2];
    kernel_w = channels_last ? f[1] : f[3];
    filter_channels = channels_last ? f[2] : f[1];
    filters = channels_last ? f[3] : f[0];
    if (groups < 1) throw InvalidArgument(fmt::format("{}: groups is {}, it must be at least 1", op, groups));
    if (input.channels % groups != 0 || filters % groups != 0) {
      throw InvalidArgument(
          fmt::format("{}: groups = {} must divide both the {} input channels of x {} and the {} "
                      "filters of filter {}",
                      op, groups, input.channels, input_shape.to_string(), filters, filter_shape.to_string()),
          "pick groups among the common divisors of the channel and filter counts");
    }
    if (filter_channels * groups != input.channels) {
      throw InvalidArgument(
          fmt::format("{}: channel mismatch: x {} has {} channels, so with groups = {} the filter "
                      "needs {} input channels, but filter {} has {}",
                      op, input_shape.to_string(), input.channels, groups, input.channels / groups,
                      filter_shape.to_string(), filter_channels),
          fmt::format("with data_format {} the filter is {}", channels_last ? "NHWC" : "NCHW", filter_layout));
    }
    rows = window_axis(input.height, kernel_h, strides[0], dilations[0], same);
    cols = window_axis(input.width, kernel_w, strides[1], dilations[1], same);
    if (!same && (rows.extent() > input.height || cols.extent() > input.width)) {
      throw InvalidArgument(fmt::format("{}: filter {}{} is larger than the padded input {}x{} with padding valid", op,
                                        filter_shape.to_string(),
                                        rows.dilation > 1 || cols.dilation > 1
                                            ? fmt::format(" (dilated to {}x{})", rows.extent(), cols.extent())
                                            : std::string(),
                                        input.height, input.width),
                            "use padding \"same\", a smaller kernel or dilation, or a larger input");
    }
    output = ImageLayout{input.batch, rows.output, cols.output, filters, channels_last};
  }

  int64_t channels_per_group() const { return filter_channels; }
  int64_t filters_per_group() const { return filters / groups; }
  // Offset of tap (ky, kx) from input channel ci (within its group) into filter f.
  int64_t filter_offset(int64_t ky, int64_t kx, int64_t ci, int64_t f) const {
    return channels_last ? ((ky * kernel_w + kx) * filter_channels + ci) * filters + f
                         : ((f * filter_channels + ci) * kernel_h + ky) * kernel_w + kx;
  }

  bool channels_last = true;
  int64_t groups = 1;
  int64_t kernel_h = 0, kernel_w = 0, filter_channels = 0, filters = 0;
  ImageLayout input, output;
  WindowAxis rows, cols;
};

// max_pool2d / avg_pool2d of x (input_shape): pool_size, strides, padding, data_format.
struct Pool2dGeometry {
  Pool2dGeometry(const Shape& input_shape, const Attrs& attrs, const std::string& op) {
    const bool channels_last = parse_channels_last(attrs.get_string("data_format"), op);
    const bool same = parse_same_padding(attrs.get_string("padding"), op);
    const auto pool = positive_pair(attrs, "pool_size", op);
    const auto strides = positive_pair(attrs, "strides", op);
    input = image_layout(input_shape, channels_last, op, "input x");
    rows = window_axis(input.height, pool[0], strides[0], 1, same);
    cols = window_axis(input.width, pool[1], strides[1], 1, same);
    if (!same && (pool[0] > input.height || pool[1] > input.width)) {
      throw InvalidArgument(fmt::format("{}: pool_size {}x{} is larger than the input {}x{} of x {} with padding valid",
                                        op, pool[0], pool[1], input.height, input.width, input_shape.to_string()),
                            "use padding \"same\" or a smaller pool_size");
    }
    output = ImageLayout{input.batch, rows.output, cols.output, input.channels, channels_last};
  }

  ImageLayout input, output;
  WindowAxis rows, cols;
};

}  // namespace nimbus::internal
