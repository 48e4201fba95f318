// The C++ side of tests/python/test_gradient_tape.py's bit-for-bit check: builds the model the test
// builds from Python (Dense(32, relu) -> Dense(10) on 16 features, weights from the global seed), takes
// gradients with GradientTape on fixed inputs, and writes everything as .npy files for the test to
// compare byte for byte.
//
//   cpp_gradients OUT_DIR SEED
//
// OUT_DIR/x.npy, labels.npy, output_gradient.npy: the inputs the Python side uses too;
// weight_K.npy: the model's trainable variables after seeding; loss_gradient_K.npy: the gradients of the
// mean sparse softmax cross-entropy; seeded_gradient_K.npy: those of the logits seeded with
// output_gradient.npy.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/rng.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/tensor/npy.h"

namespace {

constexpr int64_t kBatch = 8, kFeatures = 16, kClasses = 10;

// Values in [-0.5, 0.5) from integer arithmetic, so nothing depends on a libm.
nimbus::Tensor pattern(int64_t rows, int64_t cols, int64_t stride) {
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * stride) % 101) / 101.0f - 0.5f;
  return nimbus::Tensor::from_vector(values, {rows, cols});
}

void write_gradients(const std::string& dir, const std::string& kind, const std::vector<nimbus::Tensor>& grads) {
  for (size_t k = 0; k < grads.size(); ++k)
    nimbus::write_npy(dir + "/" + kind + "_" + std::to_string(k) + ".npy", grads[k]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR SEED\n", argv[0]);
    return 2;
  }
  try {
    using namespace nimbus;
    const std::string dir = argv[1];
    manual_seed(std::stoull(argv[2]));
    nn::Sequential model;
    model.add(nn::Input({kFeatures}));
    model.add(nn::Dense(32, {.activation = "relu"}));
    model.add(nn::Dense(kClasses));
    const std::vector<Variable> variables = model.trainable_weights();

    const Tensor x = pattern(kBatch, kFeatures, 37);
    std::vector<int32_t> label_values;
    for (int64_t i = 0; i < kBatch; ++i) label_values.push_back(static_cast<int32_t>((i * 7) % kClasses));
    const Tensor labels = Tensor::from_vector(label_values, {kBatch});
    const Tensor output_gradient = pattern(kBatch, kClasses, 53);
    write_npy(dir + "/x.npy", x);
    write_npy(dir + "/labels.npy", labels);
    write_npy(dir + "/output_gradient.npy", output_gradient);
    for (size_t k = 0; k < variables.size(); ++k) {
      write_npy(dir + "/weight_" + std::to_string(k) + ".npy", variables[k].value());
    }

    {
      GradientTape tape;
      const Tensor logits = model(std::vector<Tensor>{x}, /*training=*/true)[0];
      const Tensor loss = mean(sparse_softmax_cross_entropy(logits, labels));
      write_gradients(dir, "loss_gradient", tape.gradient(loss, variables));
    }
    {
      GradientTape tape;
      const Tensor logits = model(std::vector<Tensor>{x}, /*training=*/true)[0];
      write_gradients(dir, "seeded_gradient", tape.gradient(logits, variables, output_gradient));
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cpp_gradients: %s\n", error.what());
    return 1;
  }
}
