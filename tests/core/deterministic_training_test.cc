// runtime.deterministic: the same seed and settings give bit-identical
// weights run to run (fixed reduction orders, every draw from the seed).
#include <gtest/gtest.h>

#include <cstring>

#include "nimbus/nimbus.h"
#include "support/tensor_compare.h"

namespace nimbus {
namespace {

// 30 SGD steps of a small MLP on seeded random data; returns the final weights.
std::vector<Tensor> train_once(uint64_t seed) {
  configure_runtime({.threads = 0, .deterministic = true, .seed = seed});
  const Tensor x = random_normal({64, 20});
  const Tensor labels = cast(mul(random_uniform({64}), scalar_like(random_uniform({64}), 5.0)), DType::kI64);
  std::vector<Variable> params = {Variable(random_normal({20, 32}, 0, 0.3)), Variable(zeros({32})),
                                  Variable(random_normal({32, 5}, 0, 0.3)), Variable(zeros({5}))};
  for (int step = 0; step < 30; ++step) {
    GradientTape tape;
    const Tensor hidden = gelu(matmul(x, params[0].value()) + params[1].value());
    const Tensor logits = dropout(matmul(hidden, params[2].value()) + params[3].value(), 0.1);
    const Tensor loss = mean(sparse_softmax_cross_entropy(logits, labels));
    const std::vector<Tensor> grads = tape.gradient(loss, params);
    for (size_t i = 0; i < params.size(); ++i) params[i].assign_sub(grads[i] * 0.1);
  }
  std::vector<Tensor> weights;
  for (const Variable& v : params) weights.push_back(v.value().clone());
  return weights;
}

using nimbus::testing::bit_identical;

TEST(DeterministicTraining, SameSeedGivesBitIdenticalWeights) {
  const std::vector<Tensor> first = train_once(7);
  const std::vector<Tensor> second = train_once(7);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(bit_identical(first[i], second[i])) << "parameter " << i;
}

TEST(DeterministicTraining, AnotherSeedGivesOtherWeights) {
  const std::vector<Tensor> first = train_once(7);
  const std::vector<Tensor> other = train_once(8);
  EXPECT_FALSE(bit_identical(first[0], other[0]));
}

}  // namespace
}  // namespace nimbus
