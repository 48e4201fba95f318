// Cases for the NN layer ops: conv2d and pooling (with their backward ops),
// batch and layer normalization, dropout_mask. Shapes stay small because the
// gradient check perturbs every input element.
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "op_cases.h"

namespace nimbus::testing {
namespace {

// The output shape of `op` on inputs of these shapes (f32), from the op's own shape rule.
Shape output_shape(const char* op, std::vector<Shape> shapes, const Attrs& attrs) {
  std::vector<TensorSpec> specs;
  for (const Shape& shape : shapes) specs.push_back({shape, DType::kF32});
  return infer_outputs(OpRegistry::global().get(op), specs, attrs)[0].shape;
}

Attrs with(Attrs attrs, const char* name, const Shape& shape) {
  attrs.set(name, shape);
  return attrs;
}

}  // namespace

namespace {

struct ConvPattern {
  const char* suffix;
  Shape x, filter;
  std::vector<int64_t> strides = {1, 1};
  const char* padding = "valid";
  std::vector<int64_t> dilations = {1, 1};
  int64_t groups = 1;
  const char* data_format = "NHWC";
};

// conv2d and both of its backward ops on one geometry.
void add_conv_cases(const ConvPattern& p) {
  const Attrs attrs{{"strides", p.strides},
                    {"padding", std::string(p.padding)},
                    {"dilations", p.dilations},
                    {"groups", p.groups},
                    {"data_format", std::string(p.data_format)}};
  const std::string suffix = p.suffix;
  add_op_case({.name = "conv2d_" + suffix, .op = "conv2d", .inputs = {{p.x}, {p.filter}}, .attrs = attrs});
  const Shape y = output_shape("conv2d", {p.x, p.filter}, attrs);
  add_op_case({.name = "conv2d_backward_input_" + suffix,
               .op = "conv2d_backward_input",
               .inputs = {{y}, {p.filter}},
               .attrs = with(attrs, "input_shape", p.x)});
  add_op_case({.name = "conv2d_backward_filter_" + suffix,
               .op = "conv2d_backward_filter",
               .inputs = {{y}, {p.x}},
               .attrs = with(attrs, "filter_shape", p.filter)});
}

}  // namespace

NIMBUS_OP_CASES(conv) {
  const ConvPattern patterns[] = {
      {.suffix = "nhwc_valid", .x = {2, 5, 5, 3}, .filter = {3, 3, 3, 4}},
      {.suffix = "nhwc_same_stride2", .x = {1, 7, 6, 3}, .filter = {3, 3, 3, 2}, .strides = {2, 2}, .padding = "same"},
      {.suffix = "nhwc_valid_stride2_odd", .x = {2, 6, 7, 2}, .filter = {2, 3, 2, 3}, .strides = {2, 2}},
      {.suffix = "nhwc_dilation2", .x = {1, 7, 7, 2}, .filter = {3, 3, 2, 3}, .dilations = {2, 2}},
      // An even kernel with "same" padding puts the extra padded row and column after the input.
      {.suffix = "nhwc_same_even_kernel_mixed",
       .x = {1, 6, 7, 2},
       .filter = {2, 3, 2, 3},
       .strides = {2, 1},
       .padding = "same",
       .dilations = {1, 2}},
      {.suffix = "nhwc_groups2", .x = {2, 4, 5, 4}, .filter = {3, 2, 2, 6}, .padding = "same", .groups = 2},
      {.suffix = "nhwc_depthwise", .x = {1, 5, 5, 4}, .filter = {3, 3, 1, 8}, .padding = "same", .groups = 4},
      {.suffix = "nhwc_1x1", .x = {2, 3, 3, 5}, .filter = {1, 1, 5, 4}},
      {.suffix = "nchw_valid", .x = {2, 3, 5, 5}, .filter = {4, 3, 3, 3}, .data_format = "NCHW"},
      {.suffix = "nchw_same_stride2",
       .x = {1, 3, 7, 6},
       .filter = {2, 3, 3, 3},
       .strides = {2, 2},
       .padding = "same",
       .data_format = "NCHW"},
      {.suffix = "nchw_dilation2",
       .x = {1, 2, 7, 7},
       .filter = {3, 2, 3, 3},
       .dilations = {2, 2},
       .data_format = "NCHW"},
      {.suffix = "nchw_groups2",
       .x = {2, 4, 4, 5},
       .filter = {6, 2, 3, 2},
       .padding = "same",
       .groups = 2,
       .data_format = "NCHW"},
      {.suffix = "nchw_depthwise",
       .x = {1, 4, 5, 5},
       .filter = {4, 1, 3, 3},
       .strides = {2, 2},
       .padding = "same",
       .groups = 4,
       .data_format = "NCHW"},
  };
  for (const ConvPattern& p : patterns) add_conv_cases(p);
  // fused_conv2d (NHWC only): each activation on one geometry, and strides, groups and a larger image.
  const auto fused = [](const std::string& name, const ConvPattern& p, const char* activation) {
    add_op_case({.name = "fused_conv2d_" + name,
                 .op = "fused_conv2d",
                 .inputs = {{p.x}, {p.filter}, {Shape{p.filter[3]}}},
                 .attrs = {{"strides", p.strides},
                           {"padding", std::string(p.padding)},
                           {"dilations", p.dilations},
                           {"groups", p.groups},
                           {"data_format", std::string("NHWC")},
                           {"activation", std::string(activation)}}});
  };
  for (std::string_view activation : fused_activation_names()) {
    fused(std::string(activation), patterns[0], std::string(activation).c_str());
  }
  fused("same_stride2_relu", patterns[1], "relu");
  fused("groups2_gelu", patterns[5], "gelu_tanh");
  fused("large_relu", {.suffix = "", .x = {4, 28, 28, 3}, .filter = {3, 3, 3, 32}, .padding = "same"}, "relu");
}

namespace {

struct PoolPattern {
  const char* suffix;
  Shape x;
  std::vector<int64_t> pool_size;
  std::vector<int64_t> strides;
  const char* padding = "valid";
  const char* data_format = "NHWC";
};

// max/avg pooling and their backward ops on one geometry.
void add_pool_cases(const PoolPattern& p) {
  const Attrs attrs{{"pool_size", p.pool_size},
                    {"strides", p.strides},
                    {"padding", std::string(p.padding)},
                    {"data_format", std::string(p.data_format)}};
  const std::string suffix = p.suffix;
  const Shape y = output_shape("max_pool2d", {p.x}, attrs);
  add_op_case({.name = "max_pool2d_" + suffix, .op = "max_pool2d", .inputs = {{p.x}}, .attrs = attrs});
  add_op_case({.name = "avg_pool2d_" + suffix, .op = "avg_pool2d", .inputs = {{p.x}}, .attrs = attrs});
  add_op_case(
      {.name = "max_pool2d_backward_" + suffix, .op = "max_pool2d_backward", .inputs = {{y}, {p.x}}, .attrs = attrs});
  add_op_case({.name = "max_pool2d_relu_backward_" + suffix,
               .op = "max_pool2d_relu_backward",
               .inputs = {{y}, {p.x}},
               .attrs = attrs});
  add_op_case({.name = "avg_pool2d_backward_" + suffix,
               .op = "avg_pool2d_backward",
               .inputs = {{y}},
               .attrs = with(attrs, "input_shape", p.x)});
}

}  // namespace

NIMBUS_OP_CASES(pooling) {
  const PoolPattern patterns[] = {
      {.suffix = "nhwc_2x2", .x = {2, 4, 6, 3}, .pool_size = {2, 2}, .strides = {2, 2}},
      // Windows that tile the image, the last ones clipped (the backward kernels write each element once) ...
      {.suffix = "nhwc_2x2_same_odd", .x = {2, 5, 7, 3}, .pool_size = {2, 2}, .strides = {2, 2}, .padding = "same"},
      // ... and that leave the last row and column out (those get no gradient).
      {.suffix = "nhwc_2x2_valid_odd", .x = {2, 5, 7, 3}, .pool_size = {2, 2}, .strides = {2, 2}},
      {.suffix = "nhwc_3x3_stride2_same", .x = {1, 7, 7, 3}, .pool_size = {3, 3}, .strides = {2, 2}, .padding = "same"},
      {.suffix = "nhwc_overlap_odd", .x = {2, 5, 6, 2}, .pool_size = {3, 2}, .strides = {1, 2}},
      {.suffix = "nchw_2x3_same",
       .x = {2, 3, 5, 5},
       .pool_size = {2, 3},
       .strides = {2, 2},
       .padding = "same",
       .data_format = "NCHW"},
      {.suffix = "nchw_3x3_stride1", .x = {1, 3, 6, 7}, .pool_size = {3, 3}, .strides = {1, 1}, .data_format = "NCHW"},
  };
  for (const PoolPattern& p : patterns) add_pool_cases(p);
}

NIMBUS_OP_CASES(normalization) {
  struct Layout {
    const char* suffix;
    Shape x;
    int64_t channels;
    const char* data_format;
  };
  const Layout layouts[] = {
      {"nhwc", {2, 3, 4, 3}, 3, "NHWC"},
      {"nchw", {2, 3, 4, 5}, 3, "NCHW"},
      {"rank2", {6, 4}, 4, "NHWC"},
      {"rank3_channels_last", {3, 5, 4}, 4, "NHWC"},
  };
  for (const Layout& l : layouts) {
    const Attrs attrs{{"epsilon", 1e-3}, {"data_format", std::string(l.data_format)}};
    const InputSpec channel{{l.channels}, DType::kF32, 0.5, 2.0};
    const InputSpec variance{{l.channels}, DType::kF32, 0.2, 2.0};
    // Outputs 1 and 2 are the batch statistics; here only y feeds the loss...
    add_op_case({.name = std::string("batch_norm_training_") + l.suffix,
                 .op = "batch_norm_training",
                 .inputs = {{l.x}, channel, {{l.channels}}},
                 .attrs = attrs,
                 .loss_outputs = {0}});
    // ... and here the statistics too, whose gradients flow into x.
    add_op_case({.name = std::string("batch_norm_training_with_statistics_") + l.suffix,
                 .op = "batch_norm_training",
                 .inputs = {{l.x}, channel, {{l.channels}}},
                 .attrs = attrs});
    add_op_case({.name = std::string("batch_norm_inference_") + l.suffix,
                 .op = "batch_norm_inference",
                 .inputs = {{l.x}, channel, {{l.channels}}, {{l.channels}}, variance},
                 .attrs = attrs});
    add_op_case({.name = std::string("batch_norm_backward_") + l.suffix,
                 .op = "batch_norm_backward",
                 .inputs = {{l.x}, {l.x}, channel, {{l.channels}}, variance},
                 .attrs = attrs});
  }

  add_op_case({.name = "layer_norm_rank2",
               .op = "layer_norm",
               .inputs = {{{4, 6}}, {{6}, DType::kF32, 0.5, 2.0}, {{6}}},
               .attrs = {{"epsilon", 1e-3}}});
  add_op_case({.name = "layer_norm_rank3",
               .op = "layer_norm",
               .inputs = {{{2, 3, 5}}, {{5}, DType::kF32, 0.5, 2.0}, {{5}}},
               .attrs = {{"epsilon", 1e-5}}});
  add_op_case({.name = "layer_norm_backward",
               .op = "layer_norm_backward",
               .inputs = {{{4, 6}}, {{4, 6}}, {{6}}, {{4}}, {{4}, DType::kF32, 0.5, 2.0}}});
}

NIMBUS_OP_CASES(dropout) {
  add_op_case({.name = "dropout_mask",
               .op = "dropout_mask",
               .attrs = {{"shape", Shape{8, 16}},
                         {"dtype", DType::kF32},
                         {"rate", 0.25},
                         {"seed", int64_t{7}},
                         {"offset", int64_t{3}}}});
}

}  // namespace nimbus::testing
