// Layers: shapes, weights, numerics against hand-written references, gradients
// against finite differences in f64, build-time argument errors.
#include "nimbus/nn/layers.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/error.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "train_test_util.h"

namespace nimbus::testing {

Float64Weights::Float64Weights() { nn::set_floatx(DType::kF64); }
Float64Weights::~Float64Weights() { nn::set_floatx(DType::kF32); }

namespace {

using nn::Layer;

TEST(Dense, BuildsOnFirstCallAndComputesXWPlusB) {
  Layer dense = nn::Dense(3, {.activation = "relu", .name = "probe"});
  EXPECT_TRUE(dense.weights().empty());
  const Tensor x = random_input({4, 5});
  const Tensor y = dense(x);
  ASSERT_EQ(dense.weights().size(), 2u);
  EXPECT_EQ(dense.weights()[0].name(), "probe/kernel");
  EXPECT_EQ(dense.weights()[0].shape(), (Shape{5, 3}));
  EXPECT_EQ(dense.weights()[1].shape(), (Shape{3}));
  // The bias starts at zero; give it values so the test sees it.
  dense.weights()[1].assign(Tensor::from_vector<float>({0.5f, -0.25f, 1.0f}, {3}));
  const Tensor kernel = dense.weights()[0].value();
  const std::vector<double> xs = values_of(x), ks = values_of(kernel);
  const std::vector<double> out = values_of(dense(x));
  const double bias[3] = {0.5, -0.25, 1.0};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      double acc = bias[j];
      for (int k = 0; k < 5; ++k) acc += xs[i * 5 + k] * ks[k * 3 + j];
      EXPECT_NEAR(out[i * 3 + j], std::max(acc, 0.0), 1e-5);
    }
  }
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
}

TEST(Dense, AppliesToTheLastAxisOfRank3Inputs) {
  Layer dense = nn::Dense(2);
  const Tensor x = random_input({2, 3, 4});
  const Tensor y = dense(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2}));
  const Tensor expected =
      reshape(matmul(reshape(x, std::vector<int64_t>{6, 4}), dense.weights()[0].value()), Shape{2, 3, 2});
  EXPECT_LT(relative_error(y, expected), 1e-6);
}

TEST(Initializers, GlorotUniformStaysWithinItsLimitAndSeedsRepeat) {
  const nn::Initializer glorot{"glorot_uniform", 3};
  const std::vector<double> a = values_of(glorot.make({300, 200}));
  const std::vector<double> b = values_of(glorot.make({300, 200}));
  EXPECT_EQ(a, b);
  const double limit = std::sqrt(6.0 / 500);
  double max_abs = 0, sum_sq = 0;
  for (double v : a) {
    max_abs = std::max(max_abs, std::abs(v));
    sum_sq += v * v;
  }
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.99 * limit);
  // U(-l, l) has variance l^2 / 3.
  EXPECT_NEAR(sum_sq / double(a.size()), limit * limit / 3, 0.02 * limit * limit / 3);
}

TEST(Initializers, HeNormalIsTruncatedWithFanInVariance) {
  // Conv kernel (3, 3, 16, 64): fan_in = 144.
  const std::vector<double> w = values_of(nn::Initializer{"he_normal", 11}.make({3, 3, 16, 64}));
  const double stddev = std::sqrt(2.0 / 144);
  double sum_sq = 0, max_abs = 0;
  for (double v : w) {
    sum_sq += v * v;
    max_abs = std::max(max_abs, std::abs(v));
  }
  EXPECT_NEAR(std::sqrt(sum_sq / double(w.size())), stddev, 0.03 * stddev);
  EXPECT_LE(max_abs, 2 * stddev / 0.87962566103423978 + 1e-12);
  EXPECT_EQ(values_of(nn::Initializer("zeros").make({3})), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values_of(nn::Initializer("ones").make({2})), (std::vector<double>{1, 1}));
  EXPECT_THROW(nn::Initializer("orthogonal_typo").make({2}), InvalidArgument);
}

TEST(Conv2D, MatchesTheConvOpWithBiasAndShapes) {
  Layer conv = nn::Conv2D(4, {3, 3}, {.strides = {2, 2}, .padding = "same", .name = "c"});
  const Tensor x = random_input({2, 7, 7, 3});
  const Tensor y = conv(x);
  EXPECT_EQ(y.shape(), (Shape{2, 4, 4, 4}));
  EXPECT_EQ(conv.weights()[0].shape(), (Shape{3, 3, 3, 4}));
  conv.weights()[1].assign(Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
  const Tensor expected =
      conv2d(x, conv.weights()[0].value(), {.strides = {2, 2}, .padding = "same"}) + conv.weights()[1].value();
  EXPECT_LT(relative_error(conv(x), expected), 1e-6);
}

TEST(LayerErrors, Conv2DKernelLargerThanInputNamesLayerAndIndex) {
  nn::Sequential model({nn::InputLayer({4, 4, 1}), nn::Conv2D(8, {2, 2}), nn::Conv2D(8, {2, 2})});  // 4 -> 3 -> 2
  const std::string message = error_message([&] { model.add(nn::Conv2D(8, {5, 5}, {.name = "way_too_big"})); });
  EXPECT_NE(message.find("layer 2 'way_too_big' (Conv2D)"), std::string::npos) << message;
  EXPECT_NE(message.find("kernel 5x5 is larger than its 2x2 input"), std::string::npos) << message;
  EXPECT_NE(message.find("padding 'same'"), std::string::npos) << message;  // the hint
}

TEST(LayerErrors, Conv2DOnRank2InputAndPoolingToZeroFailAtBuild) {
  const std::string rank = error_message([] {
    nn::Sequential({nn::InputLayer({784}), nn::Dense(10, {.name = "d"}), nn::Conv2D(4, {3, 3}, {.name = "conv"})});
  });
  EXPECT_NE(rank.find("layer 1 'conv' (Conv2D)"), std::string::npos) << rank;
  EXPECT_NE(rank.find("rank-4 input"), std::string::npos) << rank;
  EXPECT_NE(rank.find("(None, 10)"), std::string::npos) << rank;

  const std::string pool = error_message([] {
    nn::KerasTensor in = nn::Input({3, 3, 2});
    nn::KerasTensor h = nn::MaxPooling2D({2, 2}, {.name = "p1"})(in);
    (void)nn::MaxPooling2D({2, 2}, {.name = "p2"})(h);  // 3 -> 1 -> 0
  });
  EXPECT_NE(pool.find("layer 2 'p2' (MaxPooling2D)"), std::string::npos) << pool;
  EXPECT_NE(pool.find("to 0"), std::string::npos) << pool;
}

TEST(LayerErrors, LazySequentialReportsAtFirstCall) {
  nn::Sequential model({nn::Flatten(), nn::Conv2D(2, {3, 3}, {.name = "late"})});
  EXPECT_FALSE(model.built());
  const std::string message = error_message([&] { (void)model(random_input({2, 4, 4, 1})); });
  EXPECT_NE(message.find("layer 1 'late' (Conv2D)"), std::string::npos) << message;
}

// Each case: a model whose layer `index` ('bad') is wrong for its input, and what the message must say.
struct BuildErrorCase {
  const char* what;
  std::function<void()> build;
  int index;
  const char* class_name;
  const char* reason;
};

TEST(LayerErrors, EachMismatchNamesTheLayerItsIndexAndTheShapes) {
  const BuildErrorCase cases[] = {
      {"Dense shared across feature sizes",
       [] {
         nn::KerasTensor a = nn::Input({4}), b = nn::Input({5});
         Layer shared = nn::Dense(3, {.name = "bad"});
         (void)shared(a);
         (void)shared(b);
       },
       1, "Dense", "built for inputs with 4 features, got (None, 5)"},  // index 1: after its InputLayer
      {"Add of mismatched shapes",
       [] {
         nn::KerasTensor in = nn::Input({6});
         (void)nn::Add({.name = "bad"})({nn::Dense(4)(in), nn::Dense(5)(in)});
       },
       3, "Add", "got (None, 4) and (None, 5)"},
      {"Reshape with a wrong element count",
       [] {
         nn::Sequential({nn::InputLayer({6, 2}), nn::Flatten(), nn::Reshape({5, 2}, {.name = "bad"})});
       },
       1, "Reshape", "cannot reshape (None, 12) (12 values per sample) to target_shape (5, 2)"},
      {"DepthwiseConv2D kernel larger than its input",
       [] {
         nn::Sequential({nn::InputLayer({2, 2, 3}), nn::DepthwiseConv2D({3, 3}, {.name = "bad"})});
       },
       0, "DepthwiseConv2D", "kernel 3x3 is larger than its 2x2 input"},
      {"AveragePooling2D on a rank-2 input",
       [] {
         nn::Sequential({nn::InputLayer({8}), nn::AveragePooling2D({2, 2}, {.name = "bad"})});
       },
       0, "AveragePooling2D", "rank-4 input (batch, height, width, channels), got rank 2 (None, 8)"},
      {"MultiHeadAttention on images",
       [] {
         nn::KerasTensor in = nn::Input({4, 4, 2});
         (void)nn::MultiHeadAttention(2, 4, {.name = "bad"})({in, in});
       },
       1, "MultiHeadAttention", "rank-3 input (batch, sequence, features) as its query"},
      {"MultiHeadAttention with a mask of the wrong length",
       [] {
         nn::KerasTensor q = nn::Input({4, 8}), v = nn::Input({5, 8}), mask = nn::Input({4, 4});
         (void)nn::MultiHeadAttention(2, 4, {.name = "bad"})({q, v, v, mask});
       },
       3, "MultiHeadAttention", "attention_mask (None, 4, 4) must be (batch, query length, key length)"},
      {"PositionEmbedding shorter than the sequence",
       [] {
         nn::Sequential({nn::InputLayer({9, 4}), nn::PositionEmbedding(8, {.name = "bad"})});
       },
       0, "PositionEmbedding", "longer than sequence_length 8"},
      {"Normalization with too few statistics",
       [] {
         nn::Sequential({nn::InputLayer({3}), nn::Normalization({.mean = std::vector<double>{0, 1},
                                                                 .variance = std::vector<double>{1, 1},
                                                                 .name = "bad"})});
       },
       0, "Normalization", "need 1 or 3 values"},
      {"GlobalAveragePooling1D on images",
       [] {
         nn::Sequential({nn::InputLayer({4, 4, 1}), nn::GlobalAveragePooling1D({.name = "bad"})});
       },
       0, "GlobalAveragePooling1D", "rank-3 input"},
  };
  for (const BuildErrorCase& c : cases) {
    const std::string message = error_message(c.build);
    EXPECT_NE(message.find(fmt::format("layer {} 'bad' ({})", c.index, c.class_name)), std::string::npos)
        << c.what << ": " << message;
    EXPECT_NE(message.find(c.reason), std::string::npos) << c.what << ": " << message;
  }
}

TEST(Pooling, MaxAverageAndGlobalAverage) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 4, 4, 1});
  EXPECT_EQ(values_of(nn::MaxPooling2D()(x)), (std::vector<double>{6, 8, 14, 16}));
  EXPECT_EQ(values_of(nn::AveragePooling2D()(x)), (std::vector<double>{3.5, 5.5, 11.5, 13.5}));
  const Tensor g = nn::GlobalAveragePooling2D()(x);
  EXPECT_EQ(g.shape(), (Shape{1, 1}));
  EXPECT_DOUBLE_EQ(g.item<double>(), 8.5);
  EXPECT_EQ(nn::MaxPooling2D({2, 2}, {.strides = std::array<int64_t, 2>{1, 1}})(x).shape(), (Shape{1, 3, 3, 1}));
}

TEST(ShapeLayers, FlattenReshapeConcatenateAddActivation) {
  const Tensor x = random_input({2, 3, 4});
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::Reshape({4, -1})(x).shape(), (Shape{2, 4, 3}));
  const Tensor a = random_input({2, 3}, DType::kF32, 1), b = random_input({2, 5}, DType::kF32, 2);
  const Tensor joined = nn::Concatenate()(std::vector<Tensor>{a, b})[0];
  EXPECT_EQ(joined.shape(), (Shape{2, 8}));
  EXPECT_EQ(joined.at<float>({1, 4}), b.at<float>({1, 1}));
  const Tensor sum_ab = nn::Add()(std::vector<Tensor>{a, a})[0];
  EXPECT_LT(relative_error(sum_ab, a * 2.0), 1e-7);
  EXPECT_LT(relative_error(nn::Activation("sigmoid")(a), sigmoid(a)), 1e-7);
  EXPECT_THROW(nn::Activation("relu6_typo"), InvalidArgument);
  EXPECT_THROW(nn::Reshape({5, -1})(x), InvalidArgument);
}

TEST(Dropout, OnlyInTrainingAndScalesKeptValues) {
  Layer drop = nn::Dropout(0.5, {.seed = 3});
  const Tensor x = ones({1000});
  EXPECT_EQ(values_of(drop(x, false)), values_of(x));
  const std::vector<double> y = values_of(drop(x, true));
  int kept = 0;
  for (double v : y) {
    EXPECT_TRUE(v == 0 || v == 2) << v;
    kept += v == 2;
  }
  EXPECT_GT(kept, 430);
  EXPECT_LT(kept, 570);
}

TEST(BatchNormalization, TrainingUsesBatchStatisticsAndUpdatesMovingOnes) {
  Layer bn = nn::BatchNormalization({.momentum = 0.9, .epsilon = 1e-3});
  const Tensor x = Tensor::from_vector<float>({1, 10, 3, 20, 5, 30, 7, 40}, {4, 2});
  const std::vector<double> y = values_of(bn(x, true));
  // Column 0: mean 4, biased variance 5; column 1: mean 25, variance 125.
  const double mean[2] = {4, 25}, variance[2] = {5, 125};
  const std::vector<double> xs = values_of(x);
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_NEAR(y[i * 2 + c], (xs[i * 2 + c] - mean[c]) / std::sqrt(variance[c] + 1e-3), 1e-5);
    }
  }
  const std::vector<Variable> weights = bn.weights();
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_EQ(weights[2].name().substr(weights[2].name().find('/')), "/moving_mean");
  EXPECT_FALSE(weights[2].trainable());
  EXPECT_NEAR(values_of(weights[2].value())[0], 0.1 * 4, 1e-6);
  EXPECT_NEAR(values_of(weights[3].value())[1], 0.9 + 0.1 * 125, 1e-4);
  EXPECT_EQ(bn->trainable_weights().size(), 2u);
  // Inference normalizes with the moving statistics.
  const std::vector<double> inference = values_of(bn(x, false));
  EXPECT_NEAR(inference[0], (1 - 0.4) / std::sqrt(0.9 + 0.5 + 1e-3), 1e-5);
}

TEST(LayerNormalization, NormalizesTheLastAxis) {
  const Tensor x = random_input({3, 6});
  const Tensor y = nn::LayerNormalization()(x);
  const std::vector<double> v = values_of(y);
  for (int r = 0; r < 3; ++r) {
    double mean = 0, sq = 0;
    for (int c = 0; c < 6; ++c) mean += v[r * 6 + c] / 6;
    for (int c = 0; c < 6; ++c) sq += (v[r * 6 + c] - mean) * (v[r * 6 + c] - mean) / 6;
    EXPECT_NEAR(mean, 0, 1e-5);
    EXPECT_NEAR(sq, 1, 2e-3);  // epsilon 1e-3 shrinks it slightly
  }
}

TEST(Embedding, LooksUpRowsAndRescalingScales) {
  Layer embedding = nn::Embedding(10, 4);
  const Tensor ids = Tensor::from_vector<int64_t>({3, 0, 3, 9}, {2, 2});
  const Tensor out = embedding(ids);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 4}));
  const std::vector<double> table = values_of(embedding.weights()[0].value());
  const std::vector<double> got = values_of(out);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(got[k], table[3 * 4 + k]);
    EXPECT_EQ(got[12 + k], table[9 * 4 + k]);
  }
  for (double v : table) EXPECT_LE(std::abs(v), 0.05);
  const Tensor pixels = Tensor::from_vector<uint8_t>({0, 51, 255}, {1, 3});
  const std::vector<double> scaled = values_of(nn::Rescaling(1.0 / 255, {.offset = -0.5})(pixels));
  EXPECT_NEAR(scaled[1], 0.2 - 0.5, 1e-7);
  EXPECT_NEAR(scaled[2], 0.5, 1e-7);
}

TEST(Regularizer, L2PenaltyIsCoefficientTimesSumOfSquares) {
  Layer dense = nn::Dense(2, {.kernel_regularizer = nn::L2(0.01)});
  (void)dense(random_input({1, 3}));
  double expected = 0;
  for (double v : values_of(dense.weights()[0].value())) expected += 0.01 * v * v;
  EXPECT_NEAR(dense->regularization_loss().item<double>(), expected, 1e-7);
}

TEST(Models, GradientsOfAWholeModelMatchFiniteDifferencesInF64) {
  Float64Weights f64;
  nn::KerasTensor in = nn::Input({6, 6, 2}, DType::kF64);
  // BatchNormalization first: after it, a conv bias would get a zero gradient (the batch mean removes it).
  nn::KerasTensor normalized = nn::BatchNormalization()(in);
  nn::KerasTensor h = nn::Conv2D(3, {3, 3}, {.padding = "same", .activation = "tanh"})(normalized);
  nn::KerasTensor skip = nn::Conv2D(3, {1, 1})(normalized);
  h = nn::AveragePooling2D()(nn::Add()({h, skip}));
  h = nn::LayerNormalization()(nn::Flatten()(h));
  nn::KerasTensor out = nn::Dense(4, {.kernel_regularizer = nn::L2(0.05)})(nn::Dense(5, {.activation = "gelu"})(h));
  nn::Model model({in}, {out});
  const Tensor x = random_input({3, 6, 6, 2}, DType::kF64);
  const Tensor target = random_input({3, 4}, DType::kF64, 9);
  // Training mode (batch statistics) makes BatchNormalization's gradient nontrivial.
  auto loss_of = [&] { return sum(square(model(x, true) - target)) + model.regularization_loss(); };
  const std::vector<Variable> variables = model.trainable_weights();
  ASSERT_EQ(variables.size(), 12u);
  GradientTape tape;
  const std::vector<Tensor> grads = tape.gradient(loss_of(), variables);
  for (size_t i = 0; i < variables.size(); ++i) {
    const std::vector<double> numeric = numeric_gradient(variables[i], [&] { return loss_of().item<double>(); });
    EXPECT_LT(relative_error(values_of(grads[i]), numeric), 1e-6) << variables[i].name();
  }
}

TEST(Models, FunctionalAndSequentialAgreeAndListLayers) {
  Layer d1 = nn::Dense(4, {.activation = "relu"}), d2 = nn::Dense(3);
  nn::Sequential sequential({nn::InputLayer({5}), d1, d2});
  nn::KerasTensor in = nn::Input({5});
  nn::Model functional({in}, {d2(d1(in))});  // the same layers, shared
  const Tensor x = random_input({2, 5});
  EXPECT_EQ(values_of(sequential(x)), values_of(functional(x)));
  EXPECT_EQ(sequential.layers().size(), 2u);
  EXPECT_EQ(functional.layers().size(), 3u);  // the InputLayer first
  EXPECT_EQ(functional.layers()[0]->class_name(), "InputLayer");
  EXPECT_EQ(sequential.count_params(), 5 * 4 + 4 + 4 * 3 + 3);
  EXPECT_EQ(sequential.get_layer(d2.name()).impl(), d2.impl());
  EXPECT_THROW(sequential.get_layer("nope"), NotFound);
  EXPECT_THROW(sequential(random_input({2, 6})), InvalidArgument);
}

TEST(Models, SummaryPrintsKerasTable) {
  nn::reset_layer_names();
  nn::Sequential model({nn::InputLayer({784}), nn::Dense(512, {.activation = "relu"}), nn::Dense(10)});
  const std::string expected =
      "Model: \"sequential\"\n"
      "_________________________________________________________________\n"
      " Layer (type)                Output Shape              Param #   \n"
      "=================================================================\n"
      " dense (Dense)               (None, 512)               401920    \n"
      "                                                                 \n"
      " dense_1 (Dense)             (None, 10)                5130      \n"
      "                                                                 \n"
      "=================================================================\n"
      "Total params: 407050 (1.55 MB)\n"
      "Trainable params: 407050 (1.55 MB)\n"
      "Non-trainable params: 0 (0.00 Byte)\n"
      "_________________________________________________________________\n";
  EXPECT_EQ(model.summary_string(), expected);

  Layer bn = nn::BatchNormalization();
  nn::KerasTensor in = nn::Input({8}, DType::kF32, "x");
  nn::Model functional({in}, {nn::Add({.name = "sum"})({bn(in), in})}, "residual");
  const std::string text = functional.summary_string();
  EXPECT_NE(text.find("Model: \"residual\""), std::string::npos) << text;
  EXPECT_NE(text.find("Connected to"), std::string::npos) << text;
  EXPECT_NE(text.find(" sum (Add)                      (None, 8)            0           batch_normalization[0][0]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Non-trainable params: 16 (64.00 Byte)"), std::string::npos) << text;
}

}  // namespace
}  // namespace nimbus::testing
