// NN op behavior the op harness does not cover: dropout's statistics and
// reproducibility, batch norm's normalized output, conv2d's error messages,
// layout equivalence, and small results worked out by hand (TF's "same"
// padding, average pooling at the border, max-pool ties, zeros and NaN).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// ---- dropout ----

TEST(Dropout, KeepsAboutOneMinusRateAndPreservesTheMean) {
  constexpr double kRate = 0.3;
  Generator gen(42);
  const Tensor x = ones({200, 500});
  const std::vector<float> y = values(dropout(x, kRate, &gen));
  double kept = 0, total = 0;
  for (float v : y) {
    if (v != 0) {
      EXPECT_FLOAT_EQ(v, static_cast<float>(1 / (1 - kRate)));
      ++kept;
    }
    total += v;
  }
  const double n = static_cast<double>(y.size());
  // 100,000 Bernoulli draws: the kept fraction's standard deviation is 0.0014.
  EXPECT_NEAR(kept / n, 1 - kRate, 0.01);
  EXPECT_NEAR(total / n, 1.0, 0.015);
}

TEST(Dropout, SameGeneratorStateGivesTheSameMask) {
  const Tensor x = random_normal({64, 32});
  Generator a(7), b(7);
  const std::vector<float> first = values(dropout(x, 0.5, &a));
  EXPECT_EQ(first, values(dropout(x, 0.5, &b)));
  // The generator moved on: the next call draws a different mask.
  EXPECT_NE(values(dropout(x, 0.5, &a)), first);
  // Restoring the state (as a checkpoint does) replays the mask.
  Generator c(99);
  c.set_state(7, 0);
  EXPECT_EQ(values(dropout(x, 0.5, &c)), first);
}

TEST(Dropout, RateZeroReturnsTheInputAndBadRatesAreRejected) {
  const Tensor x = ones({4});
  EXPECT_TRUE(dropout(x, 0.0).same_as(x));
  EXPECT_THROW(dropout(x, 1.0), InvalidArgument);
  EXPECT_THROW(dropout(x, -0.1), InvalidArgument);
}

// ---- batch norm ----

void expect_normalized(const Tensor& x, const std::string& data_format, int channel_axis) {
  const int64_t channels = x.dim(channel_axis);
  const auto [y, batch_mean, batch_variance] =
      batch_norm_training(x, ones({channels}), zeros({channels}), 1e-3, data_format);
  std::vector<int64_t> axes;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != channel_axis) axes.push_back(i);
  }
  const std::vector<float> y_mean = values(mean(y, axes)), y_variance = values(variance(y, axes));
  const std::vector<float> x_mean = values(mean(x, axes)), x_variance = values(variance(x, axes));
  const std::vector<float> got_mean = values(batch_mean), got_variance = values(batch_variance);
  for (int64_t c = 0; c < channels; ++c) {
    EXPECT_NEAR(y_mean[c], 0.0, 1e-5) << "channel " << c;
    // variance / (variance + epsilon) with variance about 4.
    EXPECT_NEAR(y_variance[c], 1.0, 1e-3) << "channel " << c;
    EXPECT_NEAR(got_mean[c], x_mean[c], 1e-5) << "channel " << c;
    EXPECT_NEAR(got_variance[c], x_variance[c], 1e-4) << "channel " << c;
  }
}

TEST(BatchNorm, TrainingOutputHasZeroMeanAndUnitVariancePerChannel) {
  Generator gen(3);
  const Tensor x = random_normal({8, 5, 5, 4}, 3.0, 2.0, DType::kF32, Device::cpu(), &gen);
  expect_normalized(x, "NHWC", 3);
  expect_normalized(x, "NCHW", 1);
  expect_normalized(reshape(x, Shape{200, 4}), "NHWC", 1);
  {
    ReferenceKernelsScope reference;
    expect_normalized(x, "NHWC", 3);
    expect_normalized(x, "NCHW", 1);
  }
}

// ---- conv2d errors ----

// The message of the InvalidArgument that `f` throws.
template <typename F>
std::string invalid_argument_message(F f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument thrown";
  return {};
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

TEST(Conv2dErrors, KernelLargerThanTheInputWithValidPadding) {
  const std::string message = invalid_argument_message([] { conv2d(zeros({1, 4, 4, 3}), zeros({5, 5, 3, 8})); });
  expect_contains(message, {"conv2d", "[5, 5, 3, 8]", "4x4", "padding valid", "same"});
}

TEST(Conv2dErrors, RankTwoInput) {
  const std::string message = invalid_argument_message([] { conv2d(zeros({4, 3}), zeros({3, 3, 3, 8})); });
  expect_contains(message, {"conv2d", "[4, 3]", "rank 2", "(N, H, W, C)"});
}

TEST(Conv2dErrors, ChannelMismatchNamesBothShapes) {
  const std::string message = invalid_argument_message([] { conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 4, 8})); });
  expect_contains(message, {"conv2d", "[1, 5, 5, 3]", "[3, 3, 4, 8]", "(KH, KW, C/groups, F)"});
  const std::string nchw = invalid_argument_message([] {
    conv2d(zeros({1, 3, 5, 5}), zeros({8, 4, 3, 3}), {.data_format = "NCHW"});
  });
  expect_contains(nchw, {"[1, 3, 5, 5]", "[8, 4, 3, 3]", "(F, C/groups, KH, KW)"});
}

TEST(Conv2dErrors, GroupsMustDivideTheChannels) {
  const std::string message = invalid_argument_message([] {
    conv2d(zeros({1, 5, 5, 6}), zeros({3, 3, 2, 8}), {.groups = 4});
  });
  expect_contains(message, {"conv2d", "groups = 4", "6 input channels", "[1, 5, 5, 6]"});
}

TEST(Conv2dErrors, UnknownPaddingAndDataFormat) {
  expect_contains(invalid_argument_message([] {
                    conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 3, 8}), {.padding = "full"});
                  }),
                  {"conv2d", "\"full\"", "valid"});
  expect_contains(invalid_argument_message([] {
                    conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 3, 8}), {.data_format = "NWHC"});
                  }),
                  {"conv2d", "\"NWHC\"", "NCHW"});
}

// ---- layouts and hand-worked results ----

// conv2d on NCHW data with an (F, C/G, KH, KW) filter gives the NHWC result, transposed.
void expect_layouts_agree() {
  Generator gen(11);
  const Tensor x = random_normal({2, 7, 6, 4}, 0, 1, DType::kF32, Device::cpu(), &gen);
  const Tensor w = random_normal({3, 3, 2, 6}, 0, 1, DType::kF32, Device::cpu(), &gen);
  const Conv2dOptions nhwc{.strides = {2, 1}, .padding = "same", .dilations = {1, 2}, .groups = 2};
  Conv2dOptions nchw = nhwc;
  nchw.data_format = "NCHW";
  const Tensor y = conv2d(x, w, nhwc);
  const Tensor y_nchw = conv2d(transpose(x, {0, 3, 1, 2}), transpose(w, {3, 2, 0, 1}), nchw);
  const std::vector<float> expected = values(y), got = values(transpose(y_nchw, {0, 2, 3, 1}));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
}

TEST(Conv2dLayouts, NhwcAndNchwAgreeOnTransposedData) {
  expect_layouts_agree();
  ReferenceKernelsScope reference;
  expect_layouts_agree();
}

// Runs `check` with the dispatched kernels, then with the reference kernels.
template <typename F>
void both_kernels(F check) {
  check();
  ReferenceKernelsScope reference;
  check();
}

TEST(Conv2dByHand, SamePaddingPutsTheExtraRowAndColumnAfter) {
  both_kernels([] {
    // x = 0..15 as a 4x4 image, 2x2 filter of ones: TF pads one row and one column after.
    const Tensor x = reshape(arange(0, 16), Shape{1, 4, 4, 1});
    const Tensor y = conv2d(x, ones({2, 2, 1, 1}), {.padding = "same"});
    const std::vector<float> expected = {10, 14, 18, 10, 26, 30, 34, 18, 42, 46, 50, 26, 25, 27, 29, 15};
    EXPECT_EQ(values(y), expected);
  });
}

TEST(Pool2dByHand, AveragePoolingDividesByTheTapsInsideTheInput) {
  both_kernels([] {
    // 1..9 as a 3x3 image, 2x2 windows with stride 2, "same": windows {1,2,4,5}, {3,6}, {7,8}, {9}.
    const Tensor x = reshape(arange(1, 10), Shape{1, 3, 3, 1});
    EXPECT_EQ(values(avg_pool2d(x, {.padding = "same"})), (std::vector<float>{3, 4.5, 7.5, 9}));
    EXPECT_EQ(values(max_pool2d(x, {.padding = "same"})), (std::vector<float>{5, 6, 8, 9}));
    const Tensor grad = avg_pool2d_backward(ones({1, 2, 2, 1}), x.shape(), {.padding = "same"});
    EXPECT_EQ(values(grad), (std::vector<float>{0.25, 0.25, 0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1}));
  });
}

TEST(Pool2dByHand, MaxPoolGradientGoesToTheFirstMaximumOfATie) {
  both_kernels([] {
    // Two 2x2 windows, each with its maximum 3 twice: the first in row-major order wins.
    const Tensor x = Tensor::from_vector<float>({1, 3, 3, 0, 3, 2, 3, 1}, {1, 2, 4, 1});
    const Tensor grad = max_pool2d_backward(Tensor::from_vector<float>({5, 7}, {1, 1, 2, 1}), x);
    EXPECT_EQ(values(grad), (std::vector<float>{0, 5, 7, 0, 0, 0, 0, 0}));
  });
}

TEST(Pool2dByHand, MaxPoolGradientOfWhole2x2WindowsHandlesTiesZerosAndNaN) {
  // One 2x2 window per channel, taps (a, b, d, e) in row-major order, nine channels (a vector and a rest).
  const float nan = std::nanf("");
  const std::vector<std::array<float, 4>> windows = {{1, 3, 3, 0}, {nan, 5, 1, 2},      {1, nan, 2, 0},
                                                     {0, 0, 0, 0}, {-1, -2, -0.5f, -3}, {-0.0f, 0, 0, 0},
                                                     {2, 1, 2, 2}, {1, 2, 3, 4},        {4, 3, 2, 1}};
  // The tap each window's gradient goes to (a NaN first tap takes it; a later NaN never wins), and whether
  // relu's gradient lets it through (that tap > 0).
  const std::vector<int> first_max = {1, 0, 2, 0, 2, 0, 0, 3, 0};
  const std::vector<bool> positive = {true, false, true, false, false, false, true, true, true};
  const int64_t channels = static_cast<int64_t>(windows.size());
  std::vector<float> x_values(4 * static_cast<size_t>(channels)), grad_y_values;
  for (int64_t c = 0; c < channels; ++c) {
    for (size_t tap = 0; tap < 4; ++tap)
      x_values[tap * static_cast<size_t>(channels) + static_cast<size_t>(c)] = windows[c][tap];
    grad_y_values.push_back(static_cast<float>(c + 1));
  }
  const Tensor x = Tensor::from_vector<float>(x_values, {1, 2, 2, channels});
  const Tensor grad_y = Tensor::from_vector<float>(grad_y_values, {1, 1, 1, channels});
  const Attrs attrs{{"pool_size", std::vector<int64_t>{2, 2}},
                    {"strides", std::vector<int64_t>{2, 2}},
                    {"padding", std::string("valid")},
                    {"data_format", std::string("NHWC")}};
  for (const bool through_relu : {false, true}) {
    // The gradient, and with relu's its sum per channel (one routed value or none per channel here).
    std::vector<float> expected(x_values.size(), 0.0f), channel_sums(static_cast<size_t>(channels), 0.0f);
    for (int64_t c = 0; c < channels; ++c) {
      if (!through_relu || positive[static_cast<size_t>(c)]) {
        expected[static_cast<size_t>(first_max[static_cast<size_t>(c)] * channels + c)] = grad_y_values[c];
        channel_sums[static_cast<size_t>(c)] = grad_y_values[c];
      }
    }
    const OpSchema& op = OpRegistry::global().get(through_relu ? "max_pool2d_relu_backward" : "max_pool2d_backward");
    both_kernels([&] {
      const std::vector<Tensor> results = call_op(op, {grad_y, x}, attrs);
      EXPECT_EQ(values(results[0]), expected) << op.name;
      if (through_relu) EXPECT_EQ(values(results[1]), channel_sums);
    });
  }
}

}  // namespace
}  // namespace nimbus
