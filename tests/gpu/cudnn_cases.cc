// Op cases for the cuDNN kernels, in the gpu suite only (they join op_cases(),
// so cross_backend_test.cc's CudaOp and CudaOpHalf run each one on the GPU
// against the CPU reference, f32 at 1e-5 and bf16 / f16 at 1e-2). Larger than
// tests/core's (which the f64 gradient checks keep tiny): channel counts that
// are multiples of 8 (the Tensor Cores' NHWC path) and the CNN's single input
// channel, odd image sizes, stride 2, dilation, groups, both layouts; and one
// asymmetric "same" padding, which cuDNN turns away, so the direct kernels
// serve it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "op_cases.h"
#include "support/window_attrs.h"

namespace nimbus::testing {
namespace {

Shape output_of(const char* op, const std::vector<Shape>& shapes, const Attrs& attrs) {
  std::vector<TensorSpec> specs;
  for (const Shape& shape : shapes) specs.push_back({shape, DType::kF32});
  return infer_outputs(OpRegistry::global().get(op), specs, attrs)[0].shape;
}

Attrs plus(Attrs attrs, const char* name, const Shape& shape) {
  attrs.set(name, shape);
  return attrs;
}

// conv2d, both backward ops and, for NHWC, fused_conv2d with bias + ReLU.
void add_convolution(const std::string& name, const Shape& x, const Shape& filter, const Attrs& attrs) {
  const Shape y = output_of("conv2d", {x, filter}, attrs);
  add_op_case({.name = "cudnn_conv2d_" + name, .op = "conv2d", .inputs = {{x}, {filter}}, .attrs = attrs});
  add_op_case({.name = "cudnn_conv2d_backward_input_" + name,
               .op = "conv2d_backward_input",
               .inputs = {{y}, {filter}},
               .attrs = plus(attrs, "input_shape", x)});
  add_op_case({.name = "cudnn_conv2d_backward_filter_" + name,
               .op = "conv2d_backward_filter",
               .inputs = {{y}, {x}},
               .attrs = plus(attrs, "filter_shape", filter)});
  if (attrs.get_string("data_format") == "NHWC") {
    for (const char* activation : {"none", "relu"}) {
      Attrs fused = attrs;
      fused.set("activation", std::string(activation));
      add_op_case({.name = "cudnn_fused_conv2d_" + std::string(activation) + "_" + name,
                   .op = "fused_conv2d",
                   .inputs = {{x}, {filter}, {Shape{y[3]}}},
                   .attrs = fused});
    }
  }
}

// Both poolings and their backward ops.
void add_pooling(const std::string& name, const Shape& x, const Attrs& attrs) {
  const Shape y = output_of("max_pool2d", {x}, attrs);
  add_op_case({.name = "cudnn_max_pool2d_" + name, .op = "max_pool2d", .inputs = {{x}}, .attrs = attrs});
  add_op_case({.name = "cudnn_avg_pool2d_" + name, .op = "avg_pool2d", .inputs = {{x}}, .attrs = attrs});
  add_op_case(
      {.name = "cudnn_max_pool2d_backward_" + name, .op = "max_pool2d_backward", .inputs = {{y}, {x}}, .attrs = attrs});
  add_op_case({.name = "cudnn_avg_pool2d_backward_" + name,
               .op = "avg_pool2d_backward",
               .inputs = {{y}},
               .attrs = plus(attrs, "input_shape", x)});
}

}  // namespace

NIMBUS_OP_CASES(cudnn) {
  add_convolution("nhwc_tensor_cores", {4, 9, 11, 16}, {3, 3, 16, 32}, conv2d_attrs("same", {1, 1}, {1, 1}, 1, "NHWC"));
  add_convolution("nhwc_stride2_odd", {3, 13, 11, 8}, {3, 3, 8, 8}, conv2d_attrs("valid", {2, 2}, {1, 1}, 1, "NHWC"));
  add_convolution("nhwc_dilation2", {2, 10, 9, 8}, {3, 3, 8, 16}, conv2d_attrs("same", {1, 1}, {2, 2}, 1, "NHWC"));
  add_convolution("nhwc_groups4", {2, 8, 8, 16}, {3, 3, 4, 16}, conv2d_attrs("same", {1, 1}, {1, 1}, 4, "NHWC"));
  // The first layer of the CNN (one input channel), which the mixed-precision rows run in bf16 at batch 4,096.
  add_convolution("nhwc_one_channel", {8, 28, 28, 1}, {3, 3, 1, 32}, conv2d_attrs("same", {1, 1}, {1, 1}, 1, "NHWC"));
  add_convolution("nhwc_1x1_stride2", {4, 7, 7, 24}, {1, 1, 24, 8}, conv2d_attrs("valid", {2, 2}, {1, 1}, 1, "NHWC"));
  add_convolution("nchw_groups2_stride2", {2, 8, 9, 9}, {8, 4, 3, 3}, conv2d_attrs("same", {2, 2}, {1, 1}, 2, "NCHW"));
  add_convolution("nchw_dilation_mixed", {1, 3, 15, 12}, {5, 3, 3, 3},
                  conv2d_attrs("valid", {2, 1}, {2, 3}, 1, "NCHW"));
  // 0 padded rows before and 1 after: the direct kernels' case.
  add_convolution("nhwc_asymmetric_same", {2, 8, 8, 8}, {3, 3, 8, 8}, conv2d_attrs("same", {2, 2}, {1, 1}, 1, "NHWC"));

  add_pooling("nhwc_3x3_stride2_odd", {3, 11, 9, 16}, pool2d_attrs({3, 3}, {2, 2}, "valid", "NHWC"));
  add_pooling("nchw_3x3_same", {2, 8, 7, 9}, pool2d_attrs({3, 3}, {1, 1}, "same", "NCHW"));
  add_pooling("nhwc_2x2_stride2", {8, 14, 14, 32}, pool2d_attrs({2, 2}, {2, 2}, "valid", "NHWC"));

  struct Norm {
    const char* name;
    Shape x;
    int64_t channels;
    const char* data_format;
  };
  for (const Norm& n : {Norm{"nhwc", {8, 6, 5, 16}, 16, "NHWC"}, Norm{"nchw", {4, 8, 7, 6}, 8, "NCHW"},
                        Norm{"rank2", {32, 24}, 24, "NHWC"}}) {
    const Attrs attrs{{"epsilon", 1e-3}, {"data_format", std::string(n.data_format)}};
    const InputSpec gamma{{n.channels}, DType::kF32, 0.5, 2.0};
    const InputSpec variance{{n.channels}, DType::kF32, 0.2, 2.0};
    add_op_case({.name = std::string("cudnn_batch_norm_training_") + n.name,
                 .op = "batch_norm_training",
                 .inputs = {{n.x}, gamma, {{n.channels}}},
                 .attrs = attrs});
    add_op_case({.name = std::string("cudnn_batch_norm_inference_") + n.name,
                 .op = "batch_norm_inference",
                 .inputs = {{n.x}, gamma, {{n.channels}}, {{n.channels}}, variance},
                 .attrs = attrs});
    add_op_case({.name = std::string("cudnn_batch_norm_backward_") + n.name,
                 .op = "batch_norm_backward",
                 .inputs = {{n.x}, {n.x}, gamma, {{n.channels}}, variance},
                 .attrs = attrs});
  }
}

namespace {

TEST(CudnnCases, EveryCudnnOpHasCasesOfItsOwn) {
  // Runs without a GPU: the harness has these cases to run once one is present.
  std::set<std::string> ops;
  for (const OpCase& c : op_cases()) {
    if (c.name.starts_with("cudnn_")) ops.insert(c.op);
  }
  for (const char* op : {"conv2d", "fused_conv2d", "conv2d_backward_input", "conv2d_backward_filter", "max_pool2d",
                         "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "batch_norm_training",
                         "batch_norm_inference", "batch_norm_backward"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
}

}  // namespace
}  // namespace nimbus::testing
