// The host side of the cuDNN kernels, which runs without a GPU: how the ops'
// geometry becomes a cuDNN problem (the algorithm cache's key), which calls
// cuDNN is given and which keep the direct kernels, and that every convolution
// and pooling of the traced CNN training step reaches a cuDNN kernel.
#include "src/kernels/cuda/cudnn_problem.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/lazy_libraries.h"
#include "support/step_models.h"
#include "support/window_attrs.h"

namespace nimbus::cuda {
namespace {

using internal::Conv2dGeometry;
using internal::Pool2dGeometry;

TEST(CudnnProblem, AnNhwcConvolutionListsCudnnsDimensionsAndItsFilterAsKrsc) {
  const Conv2dGeometry g({2, 9, 7, 6}, {3, 3, 3, 8}, testing::conv2d_attrs("same", {1, 1}, {1, 1}, 2, "NHWC"),
                         "conv2d");
  const std::optional<ConvProblem> p = conv_problem(g, DType::kF32, false);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->channels_last);
  EXPECT_EQ(p->x, (Dims4{2, 6, 9, 7}));
  EXPECT_EQ(p->filter, (Dims4{8, 3, 3, 3}));  // k, c / groups, r, s
  EXPECT_EQ(p->y, (Dims4{2, 8, 9, 7}));
  EXPECT_EQ(p->pad, (std::array<int64_t, 2>{1, 1}));
  EXPECT_EQ(p->groups, 2);
  // TF's (3, 3, 3, 8) filter is a 27 x 8 matrix; cuDNN's NHWC filter its 8 x 27 transpose.
  EXPECT_EQ(filter_transpose(*p).taps, 27);
  EXPECT_EQ(filter_transpose(*p).filters, 8);
}

TEST(CudnnProblem, AnNchwConvolutionKeepsItsStridesAndDilations) {
  const Conv2dGeometry g({1, 4, 15, 12}, {6, 4, 3, 3}, testing::conv2d_attrs("valid", {2, 1}, {2, 3}, 1, "NCHW"),
                         "conv2d");
  const std::optional<ConvProblem> p = conv_problem(g, DType::kBF16, true);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->channels_last);
  EXPECT_EQ(p->x, (Dims4{1, 4, 15, 12}));
  EXPECT_EQ(p->filter, (Dims4{6, 4, 3, 3}));
  EXPECT_EQ(p->y, (Dims4{1, 6, 6, 6}));  // (15 - 5) / 2 + 1 rows, (12 - 7) + 1 columns
  EXPECT_EQ(p->stride, (std::array<int64_t, 2>{2, 1}));
  EXPECT_EQ(p->dilation, (std::array<int64_t, 2>{2, 3}));
  EXPECT_EQ(p->pad, (std::array<int64_t, 2>{0, 0}));
  EXPECT_FALSE(p->tf32) << "TF32 concerns f32 only";
}

TEST(CudnnProblem, AsymmetricSamePaddingStaysWithTheDirectKernels) {
  // A 3x3 window with stride 2 over 8 columns pads 0 before and 1 after; cuDNN pads both sides alike.
  const Conv2dGeometry conv({1, 8, 8, 4}, {3, 3, 4, 4}, testing::conv2d_attrs("same", {2, 2}, {1, 1}, 1, "NHWC"),
                            "conv2d");
  EXPECT_FALSE(conv_problem(conv, DType::kF32, false).has_value());
  const Pool2dGeometry pool({1, 7, 7, 4}, testing::pool2d_attrs({2, 2}, {2, 2}, "same", "NHWC"), "max_pool2d");
  EXPECT_FALSE(pool_problem(pool, DType::kF32).has_value());
  // Over 9 columns the same window pads 1 on each side.
  const Conv2dGeometry odd({1, 9, 9, 4}, {3, 3, 4, 4}, testing::conv2d_attrs("same", {2, 2}, {1, 1}, 1, "NHWC"),
                           "conv2d");
  EXPECT_TRUE(conv_problem(odd, DType::kF32, false).has_value());
}

TEST(CudnnProblem, TheCacheKeyTellsApartWhatChangesTheAlgorithm) {
  const Attrs attrs = testing::conv2d_attrs("same", {1, 1}, {1, 1}, 1, "NHWC");
  const Conv2dGeometry g({8, 28, 28, 32}, {3, 3, 32, 64}, attrs, "conv2d");
  const ConvProblem base = *conv_problem(g, DType::kF32, false);
  EXPECT_EQ(base, *conv_problem(Conv2dGeometry({8, 28, 28, 32}, {3, 3, 32, 64}, attrs, "conv2d"), DType::kF32, false));
  EXPECT_NE(base, *conv_problem(g, DType::kBF16, false));
  EXPECT_NE(base, *conv_problem(g, DType::kF32, true));
  EXPECT_NE(base, *conv_problem(Conv2dGeometry({16, 28, 28, 32}, {3, 3, 32, 64}, attrs, "conv2d"), DType::kF32, false));
  EXPECT_NE(base, *conv_problem(Conv2dGeometry({8, 32, 28, 28}, {64, 32, 3, 3},
                                               testing::conv2d_attrs("same", {1, 1}, {1, 1}, 1, "NCHW"), "conv2d"),
                                DType::kF32, false));
  std::set<ConvProblem> keys{base, *conv_problem(g, DType::kF16, false), base};
  EXPECT_EQ(keys.size(), 2u);
}

TEST(CudnnProblem, APoolingListsItsWindowPaddingAndStrides) {
  const Pool2dGeometry g({2, 3, 8, 7}, testing::pool2d_attrs({3, 3}, {1, 1}, "same", "NCHW"), "avg_pool2d");
  const std::optional<PoolProblem> p = pool_problem(g, DType::kF16);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->x, (Dims4{2, 3, 8, 7}));
  EXPECT_EQ(p->y, (Dims4{2, 3, 8, 7}));
  EXPECT_EQ(p->window, (std::array<int64_t, 2>{3, 3}));
  EXPECT_EQ(p->pad, (std::array<int64_t, 2>{1, 1}));
  EXPECT_EQ(p->stride, (std::array<int64_t, 2>{1, 1}));
}

TEST(CudnnLibrary, LoadsOnFirstUseWithoutAGpu) {
  // libnimbus does not link cuDNN (CudaBuild.TheLibraryDoesNotLinkTheDriver); the first kernel loads it.
  EXPECT_GE(cudnn().cudnnGetVersion(), size_t{CUDNN_MAJOR} * 10000);
  EXPECT_STREQ(cudnn().cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED), "CUDNN_STATUS_NOT_SUPPORTED");
}

// The first CUDA kernel the registry offers for `op` in f32.
std::string first_cuda_kernel(const std::string& op) {
  const std::vector<KernelDef>& kernels = OpRegistry::global().get(op).kernels(DeviceType::kCUDA, DType::kF32);
  return kernels.empty() ? "none" : kernels.front().name;
}

TEST(CudnnKernels, ConvolutionPoolingAndBatchNormRegisterCudnnFirst) {
  for (const char* op : {"conv2d", "fused_conv2d", "conv2d_backward_input", "conv2d_backward_filter", "max_pool2d",
                         "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "batch_norm_training",
                         "batch_norm_inference", "batch_norm_backward"}) {
    EXPECT_EQ(first_cuda_kernel(op), "cudnn") << op;
  }
  for (const char* op : {"conv2d", "conv2d_backward_input", "conv2d_backward_filter", "max_pool2d", "avg_pool2d"}) {
    for (const DType dtype : {DType::kBF16, DType::kF16}) {
      EXPECT_FALSE(OpRegistry::global().get(op).kernels(DeviceType::kCUDA, dtype).empty())
          << op << " " << dtype_name(dtype);
    }
  }
  // Batch norm in bf16 / f16: cuDNN takes x, y and the gradients in 16 bits and the per-channel values in f32
  // (widened before the call, rounded back after it), so every batch-norm op has a 16-bit cuDNN kernel.
  for (const char* op : {"batch_norm_training", "batch_norm_inference", "batch_norm_backward"}) {
    for (const DType dtype : {DType::kBF16, DType::kF16}) {
      const std::vector<KernelDef>& kernels = OpRegistry::global().get(op).kernels(DeviceType::kCUDA, dtype);
      ASSERT_FALSE(kernels.empty()) << op << " " << dtype_name(dtype);
      EXPECT_EQ(kernels.front().name, "cudnn") << op << " " << dtype_name(dtype);
    }
  }
}

// Every convolution and pooling node of the traced CNN step (fusion on and off) has a cuDNN kernel first in line
// and a geometry cuDNN takes, so none of them falls back to the direct kernels.
TEST(CudnnKernels, EveryConvolutionAndPoolingOfTheCnnStepGoesToCudnn) {
  const std::set<std::string> window_ops = {
      "conv2d", "fused_conv2d", "conv2d_backward_input", "conv2d_backward_filter", "max_pool2d", "max_pool2d_backward"};
  for (const bool jit : {false, true}) {
    std::unique_ptr<testing::Model> model = testing::make_cnn();
    testing::Model* m = model.get();
    Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                             {.name = "train_step", .graph = true, .jit = jit, .input_signature = std::nullopt});
    const Tensor x = random_uniform({8, 28, 28, 1}, 0, 1);
    const Tensor labels = cast(random_uniform({8}, 0, 10, DType::kF64), DType::kI64);
    const graph::Graph& g = step.traced_for({x, labels, testing::Adam::step_size(1)}).optimized;
    std::set<std::string> seen;
    for (const graph::Node& node : g.nodes()) {
      if (node.removed || node.kind != graph::NodeKind::kOp || !window_ops.count(node.op->name)) continue;
      const std::string& op = node.op->name;
      seen.insert(op);
      EXPECT_EQ(first_cuda_kernel(op), "cudnn") << op;
      auto shape = [&](size_t i) { return g.spec(node.inputs[i]).shape; };
      if (op == "max_pool2d") {
        EXPECT_TRUE(pool_problem(Pool2dGeometry(shape(0), node.attrs, op), DType::kF32)) << op;
      } else if (op == "max_pool2d_backward") {
        EXPECT_TRUE(pool_problem(Pool2dGeometry(shape(1), node.attrs, op), DType::kF32)) << op;
      } else if (op == "conv2d_backward_input") {
        const Conv2dGeometry geometry(node.attrs.get_shape("input_shape"), shape(1), node.attrs, op);
        EXPECT_TRUE(conv_problem(geometry, DType::kF32, false)) << op;
      } else if (op == "conv2d_backward_filter") {
        const Conv2dGeometry geometry(shape(1), node.attrs.get_shape("filter_shape"), node.attrs, op);
        EXPECT_TRUE(conv_problem(geometry, DType::kF32, false)) << op;
      } else {
        EXPECT_TRUE(conv_problem(Conv2dGeometry(shape(0), shape(1), node.attrs, op), DType::kF32, false)) << op;
      }
    }
    EXPECT_TRUE(seen.count("max_pool2d") && seen.count("conv2d_backward_filter")) << "fusion " << jit;
    EXPECT_TRUE(seen.count(jit ? "fused_conv2d" : "conv2d")) << "fusion " << jit;
  }
}

}  // namespace
}  // namespace nimbus::cuda
