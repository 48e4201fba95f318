// Training steps written directly with ops (the PyTorch peer's MLP and CNN,
// and an elementwise-heavy residual block), each with Adam, for the graph
// mode's end-to-end tests and benchmarks: the same model code serves
// tests/graph/training_modes_test.cc, bench/bench_graph.cc and, with its
// parameters on the GPU, bench/gpu/bench_gpu.cc. Parameters start on the CPU
// (the same seeded values on every device) and move to `device`.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/data/idx.h"
#include "nimbus/nimbus.h"

namespace nimbus::testing {

// The Fashion-MNIST training images as f32 (60000, 28, 28, 1) in [0, 1] and labels as i64, loaded once.
struct Data {
  Tensor images, labels;
  static const Data& get() {
    static const Data data = [] {
      const std::string dir = data::kFashionMnistDir;
      Tensor images = data::read_idx(dir + "/train-images-idx3-ubyte.gz").to(DType::kF32) / 255.0;
      Tensor labels = data::read_idx(dir + "/train-labels-idx1-ubyte.gz").to(DType::kI64);
      return Data{reshape(images, std::vector<int64_t>{60000, 28, 28, 1}), labels};
    }();
    return data;
  }
};

// Adam (Kingma and Ba) written with ops; the bias-corrected step size comes in
// as a scalar tensor so that one traced graph serves every step.
struct Adam {
  std::vector<Variable> params, m, v;
  explicit Adam(std::vector<Variable> p) : params(std::move(p)) {
    for (const Variable& w : params) {
      m.emplace_back(zeros_like(w.value()), w.name() + "/m", false);
      v.emplace_back(zeros_like(w.value()), w.name() + "/v", false);
    }
  }
  // Host side: the step size for update number t (from 1).
  static Tensor step_size(int64_t t, double lr = 1e-3, Device device = Device::cpu()) {
    return full({}, lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t))).to(device);
  }
  void apply(const std::vector<Tensor>& grads, const Tensor& step_size) {
    for (size_t i = 0; i < params.size(); ++i) {
      m[i].assign(m[i].value() * 0.9 + grads[i] * 0.1);
      v[i].assign(v[i].value() * 0.999 + square(grads[i]) * 0.001);
      params[i].assign_sub(step_size * m[i].value() / (sqrt(v[i].value()) + 1e-7));
    }
  }
};

inline Variable dense_kernel(int64_t in, int64_t out, const std::string& name, Generator& gen, Device device) {
  const double limit = std::sqrt(6.0 / static_cast<double>(in + out));  // glorot_uniform
  return Variable(random_uniform({in, out}, -limit, limit, DType::kF32, Device::cpu(), &gen).to(device), name);
}

inline Variable bias(int64_t size, const std::string& name, Device device) {
  return Variable(zeros({size}).to(device), name);
}

// A model: its parameters, a loss on (x, labels), and Adam; step() is what gets traced.
struct Model {
  std::vector<Variable> params;
  std::function<Tensor(const Tensor& x, const Tensor& labels)> loss;
  std::unique_ptr<Adam> adam;

  std::vector<Tensor> step(const std::vector<Tensor>& in) {
    GradientTape tape;
    const Tensor value = loss(in[0], in[1]);
    adam->apply(tape.gradient(value, params), in[2]);
    return {value};
  }
};

// 784 -> 512 ReLU -> `hidden2` ReLU -> 10 (bench_graph's peer has 256, bench_gpu's 512).
inline std::unique_ptr<Model> make_mlp(Device device = Device::cpu(), int64_t hidden2 = 256) {
  Generator gen(1);
  auto model = std::make_unique<Model>();
  model->params = {dense_kernel(784, 512, "d1/kernel", gen, device),     bias(512, "d1/bias", device),
                   dense_kernel(512, hidden2, "d2/kernel", gen, device), bias(hidden2, "d2/bias", device),
                   dense_kernel(hidden2, 10, "d3/kernel", gen, device),  bias(10, "d3/bias", device)};
  Model* m = model.get();
  model->loss = [m](const Tensor& images, const Tensor& labels) {
    const auto& p = m->params;
    Tensor x = reshape(images, std::vector<int64_t>{images.dim(0), 784});
    x = relu(matmul(x, p[0].value()) + p[1].value());
    x = relu(matmul(x, p[2].value()) + p[3].value());
    const Tensor logits = matmul(x, p[4].value()) + p[5].value();
    return mean(sparse_softmax_cross_entropy(logits, labels));
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

inline std::unique_ptr<Model> make_cnn(Device device = Device::cpu()) {
  Generator gen(1);
  auto model = std::make_unique<Model>();
  auto conv_kernel = [&](int64_t in, int64_t out, const std::string& name) {
    const double limit = std::sqrt(6.0 / static_cast<double>(9 * (in + out)));
    return Variable(random_uniform({3, 3, in, out}, -limit, limit, DType::kF32, Device::cpu(), &gen).to(device), name);
  };
  model->params = {conv_kernel(1, 32, "c1/kernel"),
                   bias(32, "c1/bias", device),
                   conv_kernel(32, 64, "c2/kernel"),
                   bias(64, "c2/bias", device),
                   dense_kernel(64 * 7 * 7, 128, "d1/kernel", gen, device),
                   bias(128, "d1/bias", device),
                   dense_kernel(128, 10, "d2/kernel", gen, device),
                   bias(10, "d2/bias", device)};
  Model* m = model.get();
  model->loss = [m](const Tensor& images, const Tensor& labels) {
    const auto& p = m->params;
    const Conv2dOptions same{.padding = "same"};
    Tensor x = relu(conv2d(images, p[0].value(), same) + p[1].value());
    x = max_pool2d(x);
    x = relu(conv2d(x, p[2].value(), same) + p[3].value());
    x = flatten(max_pool2d(x));
    x = relu(matmul(x, p[4].value()) + p[5].value());
    const Tensor logits = matmul(x, p[6].value()) + p[7].value();
    return mean(sparse_softmax_cross_entropy(logits, labels));
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

// A residual block with GELU and layer norm over d features, trained towards a target with SGD.
inline std::unique_ptr<Model> make_block(int64_t d) {
  Generator gen(2);
  auto model = std::make_unique<Model>();
  const Device cpu = Device::cpu();
  model->params = {dense_kernel(d, 4 * d, "up", gen, cpu),   Variable(zeros({4 * d}), "up/bias"),
                   dense_kernel(4 * d, d, "down", gen, cpu), Variable(zeros({d}), "down/bias"),
                   Variable(ones({d}), "ln/gamma"),          Variable(zeros({d}), "ln/beta")};
  Model* m = model.get();
  model->loss = [m](const Tensor& x, const Tensor& target) {
    const auto& p = m->params;
    const Tensor h = gelu(matmul(x, p[0].value()) + p[1].value());
    const Tensor y = layer_norm(x + matmul(h, p[2].value()) + p[3].value(), p[4].value(), p[5].value());
    const Tensor z = gelu(y) * 0.5 + y;
    return mean(square(z - target));
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

// A shuffled minibatch of Fashion-MNIST, gathered by index as the PyTorch peer does.
inline auto fashion_batches(bool flat) {
  return [flat, gen = std::make_shared<Generator>(7)](int64_t batch) {
    const Data& data = Data::get();
    const Tensor index = cast(random_uniform({batch}, 0, 60000, DType::kF64, Device::cpu(), gen.get()), DType::kI64);
    Tensor x = gather(data.images, index, 0);
    if (flat) x = reshape(x, std::vector<int64_t>{batch, 784});
    return std::make_pair(x, gather(data.labels, index, 0));
  };
}

}  // namespace nimbus::testing
