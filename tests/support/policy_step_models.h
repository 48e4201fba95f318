// Training steps of models made of nn layers under a dtype policy ("float32",
// "mixed_bfloat16", "mixed_float16"; nn/dtype_policy.h), for issue 10's GPU
// check: a pre-LN transformer block and the example's CNN
// (examples/fashion_mnist_cnn.yaml). Their layers are made with the global
// policy set, as `runtime.precision` does, so under a mixed policy they cast
// to the compute dtype and their ops follow the per-op table
// (src/ops/precision.cc); the variables stay f32. The same code serves
// tests/precision/transformer_block_test.cc, tests/cuda/training_step_ops_test.cc
// and bench/gpu/bench_gpu.cc. Weights come from seeded initializers, so every
// policy and device starts from the same values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>

#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "tests/support/policy_scope.h"
#include "tests/support/step_models.h"

namespace nimbus::testing {

// A Model (step_models.h) around a network of nn layers: its weights moved to `device` (before any tape
// or trace refers to them), Adam over its trainable weights, and the loss of its (f32) output.
inline std::unique_ptr<Model> layer_model(const nn::Model& net, Device device,
                                          std::function<Tensor(const Tensor& output, const Tensor& labels)> loss) {
  for (Variable weight : net.weights()) weight.place_on(device);
  auto model = std::make_unique<Model>();
  model->params = net.trainable_weights();
  model->loss = [net, loss = std::move(loss)](const Tensor& x, const Tensor& labels) {
    return loss(net(x, /*training=*/true), labels);
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

struct TransformerBlockSize {
  int64_t d_model = 1024;
  int64_t heads = 16;
  int64_t sequence = 512;
  int64_t feed_forward = 4096;
};

// A pre-LN transformer block over (batch, sequence, d_model), with self-attention over the whole
// sequence (no causal mask: an encoder block):
//   h = x + MultiHeadAttention(LayerNorm(x)),  y = h + Dense(d_model)(Dense(feed_forward, gelu)(LayerNorm(h)))
// trained with Adam to bring y towards a target of y's shape (mean squared error).
inline std::unique_ptr<Model> make_transformer_block(const TransformerBlockSize& size, std::string_view policy,
                                                     Device device = Device::cpu()) {
  uint64_t seed = 11;
  const auto glorot = [&seed] { return nn::Initializer{"glorot_uniform", seed++}; };
  const auto net = [&] {
    const GlobalPolicyScope scope(policy);
    const nn::KerasTensor x = nn::Input({size.sequence, size.d_model});
    const nn::KerasTensor normed = nn::LayerNormalization()(x);
    const nn::KerasTensor attention = nn::MultiHeadAttention(size.heads, size.d_model / size.heads,
                                                             {.kernel_initializer = glorot()})({normed, normed});
    const nn::KerasTensor h = nn::Add()({x, attention});
    const nn::KerasTensor up = nn::Dense(
        size.feed_forward, {.activation = "gelu", .kernel_initializer = glorot()})(nn::LayerNormalization()(h));
    const nn::KerasTensor down = nn::Dense(size.d_model, {.kernel_initializer = glorot()})(up);
    return nn::Model({x}, {nn::Add()({h, down})}, "transformer_block");
  }();
  return layer_model(net, device, [](const Tensor& y, const Tensor& target) { return mean(square(y - target)); });
}

// examples/fashion_mnist_cnn.yaml's CNN (conv32-pool-conv64-pool-dense128-dense10, NHWC) with sparse
// softmax cross-entropy on integer labels.
inline std::unique_ptr<Model> make_layer_cnn(std::string_view policy, Device device = Device::cpu()) {
  uint64_t seed = 21;
  const auto glorot = [&seed] { return nn::Initializer{"glorot_uniform", seed++}; };
  const auto net = [&] {
    const GlobalPolicyScope scope(policy);
    const auto conv = [&](int64_t filters) {
      return nn::Conv2D(filters, {3, 3}, {.padding = "same", .activation = "relu", .kernel_initializer = glorot()});
    };
    return nn::Sequential({nn::InputLayer({28, 28, 1}), conv(32), nn::MaxPooling2D(), conv(64), nn::MaxPooling2D(),
                           nn::Flatten(), nn::Dense(128, {.activation = "relu", .kernel_initializer = glorot()}),
                           nn::Dense(10, {.kernel_initializer = glorot()})});
  }();
  return layer_model(net, device, [](const Tensor& logits, const Tensor& labels) {
    return mean(sparse_softmax_cross_entropy(logits, labels));
  });
}

}  // namespace nimbus::testing
