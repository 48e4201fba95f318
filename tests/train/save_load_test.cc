// Model configs, save and load_model: round trips through JSON and safetensors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/tensor/safetensors.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()))).string();
}

Tensor input(const Shape& shape) {
  Generator generator(4);
  return random_normal(shape, 0, 1, DType::kF32, Device::cpu(), &generator);
}

TEST(LayerConfig, EveryLayerRoundTripsThroughItsConfig) {
  const std::vector<nn::Layer> layers = {
      nn::Dense(7, {.activation = "tanh",
                    .use_bias = false,
                    .kernel_initializer = {"he_normal", 5},
                    .kernel_regularizer = nn::L2(0.01)}),
      nn::Conv2D(3, {5, 3}, {.strides = {2, 1}, .padding = "same", .dilation_rate = {1, 2}, .activation = "relu"}),
      nn::MaxPooling2D({3, 3}, {.strides = std::array<int64_t, 2>{2, 2}, .padding = "same"}),
      nn::AveragePooling2D(),
      nn::GlobalAveragePooling2D(),
      nn::Flatten(),
      nn::Reshape({4, -1}),
      nn::Activation("gelu"),
      nn::Add(),
      nn::Concatenate({.axis = 1}),
      nn::Dropout(0.3, {.seed = 9}),
      nn::BatchNormalization({.momentum = 0.9, .epsilon = 1e-5, .center = false}),
      nn::LayerNormalization({.epsilon = 1e-6}),
      nn::Embedding(100, 8),
      nn::Rescaling(0.5, {.offset = 1}),
      nn::InputLayer({28, 28, 1}, DType::kU8),
      nn::DepthwiseConv2D({3, 3}, {.strides = {2, 2},
                                   .padding = "same",
                                   .depth_multiplier = 2,
                                   .activation = "relu",
                                   .depthwise_regularizer = nn::L2(0.1)}),
      nn::GlobalAveragePooling1D(),
      nn::MultiHeadAttention(4, 8, {.value_dim = 6, .dropout = 0.1, .use_bias = false, .output_shape = 12, .seed = 3}),
      nn::PositionEmbedding(28, {.initializer = {"he_normal", 1}}),
      nn::Normalization({.mean = std::vector<double>{1, 2}, .variance = std::vector<double>{3, 4}, .invert = true}),
      nn::Normalization({.axis = {}}),
  };
  for (const nn::Layer& layer : layers) {
    const nlohmann::json config = layer->get_config();
    const nn::Layer copy = nn::layer_from_config(layer->class_name(), config);
    EXPECT_EQ(copy->class_name(), layer->class_name());
    EXPECT_EQ(copy->get_config(), config) << layer->class_name();
  }
  // Keras's forms: object initializers, integer kernel sizes, batch_shape.
  const nn::Layer conv = nn::layer_from_config(
      "Conv2D", {{"name", "c"},
                 {"filters", 4},
                 {"kernel_size", 3},
                 {"trainable", true},
                 {"kernel_initializer", {{"class_name", "HeNormal"}, {"config", {{"seed", nullptr}}}}}});
  EXPECT_EQ(conv->get_config()["kernel_size"], nlohmann::json({3, 3}));
  EXPECT_EQ(conv->get_config()["kernel_initializer"], "he_normal");
  EXPECT_THROW(nn::layer_from_config("SpectralNormalization", {{"name", "s"}}), InvalidArgument);
  EXPECT_THROW(nn::layer_from_config("Dense", {{"name", "d"}}), InvalidArgument);  // no units
}

TEST(SaveLoad, SequentialKeepsArchitectureAndWeights) {
  nn::Sequential model({nn::InputLayer({6, 6, 1}), nn::Conv2D(2, {3, 3}, {.activation = "relu"}),
                        nn::BatchNormalization(), nn::Flatten(), nn::Dense(3)},
                       "saved_cnn");
  const Tensor x = input({4, 6, 6, 1});
  (void)model(x, true);  // moves the BatchNormalization statistics away from their start
  const std::string path = temp_path("sequential.safetensors");
  model.save(path);
  const nn::Model loaded = nn::load_model(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.name(), "saved_cnn");
  EXPECT_EQ(loaded.to_config(), model.to_config());
  EXPECT_EQ(loaded.summary_string(), model.summary_string());
  EXPECT_EQ(values_of(loaded(x)), values_of(model(x)));
  EXPECT_EQ(values_of(loaded.weights()[4].value()), values_of(model.weights()[4].value()));  // moving mean
}

TEST(SaveLoad, FunctionalResidualModel) {
  nn::KerasTensor in = nn::Input({8}, DType::kF32, "features");
  nn::Layer shared = nn::Dense(8, {.activation = "relu", .name = "shared"});
  nn::KerasTensor h = shared(in);
  nn::KerasTensor twice = shared(h);  // a layer called twice: two nodes, one set of weights
  nn::KerasTensor joined = nn::Concatenate({.name = "join"})({nn::Add({.name = "sum"})({h, twice}), in});
  nn::Model model({in}, {nn::Dense(2, {.name = "head"})(joined)}, "residual");
  const std::string path = temp_path("functional.safetensors");
  model.save(path);
  const nn::Model loaded = nn::load_model(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.to_config(), model.to_config());
  const Tensor x = input({3, 8});
  EXPECT_EQ(values_of(loaded(x)), values_of(model(x)));
  EXPECT_EQ(loaded.count_params(), model.count_params());
}

TEST(SaveLoad, FrozenLayersAndMixedPoliciesSurvive) {
  nn::Layer frozen = nn::Dense(3, {.name = "frozen"});
  frozen->trainable = false;
  nn::Layer mixed = nn::Dense(2, {.name = "mixed"});
  mixed->dtype_policy = nn::DTypePolicy::named("mixed_bfloat16");
  nn::Sequential model({nn::InputLayer({4}), frozen, mixed, nn::Dense(1, {.name = "plain"})}, "kept");
  const std::string path = temp_path("kept.safetensors");
  model.save(path);
  const nn::Model loaded = nn::load_model(path);
  std::remove(path.c_str());
  EXPECT_FALSE(loaded.get_layer("frozen")->trainable);
  EXPECT_TRUE(loaded.get_layer("plain")->trainable);
  EXPECT_EQ(loaded.get_layer("mixed")->dtype_policy.name, "mixed_bfloat16");
  EXPECT_EQ(loaded.get_layer("plain")->dtype_policy.name, "float32");
  EXPECT_EQ(loaded.trainable_weights().size(), 4u);
}

TEST(SaveLoad, TransformerBlockKeepsAttentionAndAdaptedStatistics) {
  nn::KerasTensor in = nn::Input({5, 3});
  nn::Layer normalization = nn::Normalization({.name = "norm"});
  nn::adapt(normalization, input({20, 5, 3}) * 3.0 + 1.0);
  nn::KerasTensor h = nn::Dense(8, {.name = "tokens"})(normalization(in));
  h = nn::Add()({h, nn::PositionEmbedding(5, {.name = "pos"})(h)});
  h = nn::MultiHeadAttention(2, 4, {.name = "mha"})({h, h});
  nn::Model model({in}, {nn::Dense(2)(nn::GlobalAveragePooling1D()(h))}, "block");
  const std::string path = temp_path("transformer.safetensors");
  model.save(path);
  const nn::Model loaded = nn::load_model(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.to_config(), model.to_config());
  EXPECT_EQ(values_of(loaded.get_layer("norm").weights()[0].value()),
            values_of(normalization.weights()[0].value()));  // the adapted mean, not zeros
  const Tensor x = input({2, 5, 3});
  EXPECT_EQ(values_of(loaded(x)), values_of(model(x)));
}

TEST(SaveLoad, RefusesTruncatedAndForeignFiles) {
  nn::Sequential model({nn::InputLayer({4}), nn::Dense(2)});
  const std::string path = temp_path("truncated.safetensors");
  model.save(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  EXPECT_THROW(nn::load_model(path), DataError);
  write_safetensors(path, {{"x", Tensor::scalar<float>(1)}});
  EXPECT_EQ(read_safetensors(path).tensors.at("x").item<float>(), 1.0f);
  EXPECT_THROW(nn::load_model(path), DataError);  // tensors only: no architecture
  std::remove(path.c_str());
  EXPECT_THROW(nn::load_model(path), NotFound);
  EXPECT_THROW(nn::Sequential({nn::Dense(2)}).save(path), InvalidArgument);  // not built
}

}  // namespace
}  // namespace nimbus::testing
