// Models from Keras's own model.to_json() files (Keras 3 and tf.keras 2) and
// from a config's layer list, Sequential or functional (`inbound`).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/config.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

// The files in tests/train/keras/ are in the exact form Keras 3.x and tf.keras 2.15 write
// (module/registered_name/build_config keys, DTypePolicy objects, __keras_tensor__ node
// arguments, keyword tensors); see tests/train/keras/README.md.
nlohmann::json keras_file(const std::string& name) {
  std::ifstream in("tests/train/keras/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

std::vector<std::string> class_names(const nn::Model& model) {
  std::vector<std::string> names;
  for (const nn::Layer& layer : model.layers()) names.push_back(layer->class_name());
  return names;
}

TEST(KerasJson, Keras3SequentialCnnWithDepthwiseConvolution) {
  const nn::Model model = nn::model_from_config(keras_file("keras3_sequential_cnn.json"));
  EXPECT_EQ(model.name(), "sequential");
  EXPECT_EQ(class_names(model),
            (std::vector<std::string>{"Conv2D", "DepthwiseConv2D", "MaxPooling2D", "Flatten", "Dropout", "Dense"}));
  // conv 3*3*1*8 + 8; depthwise 3*3*8*2 + 16; dense 12*12*16*10 + 10.
  EXPECT_EQ(model.count_params(), 80 + 160 + 23050);
  EXPECT_EQ(model.get_layer("depthwise_conv2d").weights()[0].shape(), (Shape{3, 3, 8, 2}));
  EXPECT_EQ(model.outputs()[0].shape(), (nn::Dims{-1, 10}));
  const Tensor probabilities = model(random_input({2, 28, 28, 1}));
  double total = 0;
  for (int i = 0; i < 10; ++i) total += values_of(probabilities)[i];
  EXPECT_NEAR(total, 1.0, 1e-5);  // the softmax activation was read
}

TEST(KerasJson, Keras3FunctionalTransformerBlock) {
  const nn::Model model = nn::model_from_config(keras_file("keras3_functional_transformer.json"));
  EXPECT_EQ(model.name(), "transformer");
  EXPECT_EQ(class_names(model),
            (std::vector<std::string>{"InputLayer", "Normalization", "Dense", "MultiHeadAttention", "Add",
                                      "LayerNormalization", "GlobalAveragePooling1D", "Dense"}));
  // dense 28*32 + 32; attention 4 * (32*2*16 + 32); layer norm 2*32; dense 32*10 + 10; normalization 2*28 frozen.
  EXPECT_EQ(model.count_params(), 928 + 4224 + 64 + 330 + 56);
  EXPECT_EQ(model.non_trainable_weights().size(), 2u);
  EXPECT_EQ(model.get_layer("layer_normalization").weights()[0].shape(), (Shape{32}));
  EXPECT_EQ(model(random_input({3, 28, 28})).shape(), (Shape{3, 10}));
  // Saved and reloaded through Nimbus's own form, it is the same graph.
  const nn::Model again = nn::model_from_config(model.to_config());
  EXPECT_EQ(class_names(again), class_names(model));
  EXPECT_EQ(again.count_params(), model.count_params());
}

TEST(KerasJson, Keras2FunctionalPassesTheAttentionValueByKeyword) {
  const nn::Model model = nn::model_from_config(keras_file("keras2_functional_cross_attention.json"));
  const nn::Layer attention = model.get_layer("multi_head_attention");
  // query: the Dense output (32 features); value and key: the input (28 features), given as kwargs.
  EXPECT_EQ(attention.weights()[0].shape(), (Shape{32, 2, 8}));  // query/kernel
  EXPECT_EQ(attention.weights()[2].shape(), (Shape{28, 2, 8}));  // key/kernel
  EXPECT_EQ(attention.weights()[4].shape(), (Shape{28, 2, 8}));  // value/kernel
  EXPECT_EQ(model.count_params(), 928 + 528 + 464 + 464 + 544 + 8970);
  EXPECT_EQ(model(random_input({2, 28, 28})).shape(), (Shape{2, 10}));
}

TEST(KerasJson, RefusesWhatItCannotRepresent) {
  nlohmann::json file = keras_file("keras3_sequential_cnn.json");
  file["config"]["layers"][1]["config"]["groups"] = 2;
  EXPECT_NE(error_message([&] { nn::model_from_config(file); }).find("groups 2"), std::string::npos);
  file = keras_file("keras3_sequential_cnn.json");
  file["config"]["layers"][1]["config"]["data_format"] = "channels_first";
  EXPECT_NE(error_message([&] { nn::model_from_config(file); }).find("channels_first"), std::string::npos);
  file = keras_file("keras2_functional_cross_attention.json");
  file["config"]["layers"][2]["inbound_nodes"][0][0][3] = {{"bias", {"input_1", 0, 0}}};
  EXPECT_NE(error_message([&] { nn::model_from_config(file); }).find("takes no tensor argument 'bias'"),
            std::string::npos);
}

TEST(KerasJson, NimbusTrainTakesKerasJsonAsItsModelSection) {
  // YAML reads JSON, so Keras's file pasted under `model:` is a config.
  std::ifstream in("tests/train/keras/keras3_functional_transformer.json");
  const std::string keras((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json config =
      train::parse_config("model: " + keras + "\ndata:\n  train: {images: a.idx, labels: b.idx}\n", "keras.yaml");
  EXPECT_EQ(config["model"]["module"], "keras.src.models.functional");
  EXPECT_EQ(nn::model_from_config(config["model"]).count_params(), 928 + 4224 + 64 + 330 + 56);
}

TEST(LayerList, InboundNamesMakeAFunctionalGraph) {
  const nlohmann::json layers = nlohmann::json::parse(R"([
    {"Conv2D": {"name": "stem", "filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"}},
    {"Conv2D": {"name": "branch", "filters": 4, "kernel_size": 3, "padding": "same"}},
    {"Add": {"name": "residual", "inbound": ["stem", "branch"]}},
    {"GlobalAveragePooling2D": {}},
    {"Dense": {"units": 3}}
  ])");
  const nn::Model model = nn::model_from_layer_list({8, 8, 1}, DType::kF32, layers, "res");
  EXPECT_EQ(class_names(model),
            (std::vector<std::string>{"InputLayer", "Conv2D", "Conv2D", "Add", "GlobalAveragePooling2D", "Dense"}));
  EXPECT_EQ(model.to_config()["class_name"], "Functional");
  // The Add's inputs are stem and branch; branch takes stem (the previous entry).
  const auto config = model.to_config()["config"]["layers"];
  EXPECT_EQ(config[3]["inbound_nodes"][0][0][0], "stem");
  EXPECT_EQ(config[3]["inbound_nodes"][0][1][0], "branch");
  EXPECT_EQ(config[2]["inbound_nodes"][0][0][0], "stem");
  EXPECT_EQ(model(random_input({2, 8, 8, 1})).shape(), (Shape{2, 3}));
  // Without inbound it is a Sequential.
  const nn::Model plain =
      nn::model_from_layer_list({4}, DType::kF32, nlohmann::json::parse(R"([{"Dense": {"units": 2}}])"));
  EXPECT_EQ(plain.to_config()["class_name"], "Sequential");
}

TEST(LayerList, UnknownOrDuplicateNamesAreErrorsNamingTheEntry) {
  const std::string unknown = error_message([] {
    nn::model_from_layer_list({4}, DType::kF32, nlohmann::json::parse(R"([
      {"Dense": {"name": "a", "units": 2}},
      {"Add": {"name": "sum", "inbound": ["a", "b"]}}])"));
  });
  EXPECT_NE(unknown.find("model.layers[1] (Add 'sum'): inbound 'b' names no earlier layer"), std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("earlier layers: a, input"), std::string::npos) << unknown;
  const std::string duplicate = error_message([] {
    nn::model_from_layer_list({4}, DType::kF32, nlohmann::json::parse(R"([
      {"Dense": {"name": "a", "units": 2}},
      {"Dense": {"name": "a", "units": 2, "inbound": "input"}}])"));
  });
  EXPECT_NE(duplicate.find("model.layers[1] (Dense): the name 'a' is taken"), std::string::npos) << duplicate;
  const std::string shape = error_message([] {
    nn::model_from_layer_list({4}, DType::kF32, nlohmann::json::parse(R"([
      {"Dense": {"name": "a", "units": 2}},
      {"Dense": {"name": "b", "units": 3, "inbound": "input"}},
      {"Add": {"name": "bad", "inbound": ["a", "b"]}}])"));
  });
  EXPECT_NE(shape.find("layer 2 'bad' (Add)"), std::string::npos) << shape;
}

}  // namespace
}  // namespace nimbus::testing
