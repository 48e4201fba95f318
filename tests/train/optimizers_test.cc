// Optimizers and schedules against their update rules written out in f64 on the host.
#include "nimbus/train/optimizers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "nimbus/base/error.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

using train::Optimizer;

const std::vector<double> kStart = {0.5, -1.5, 2.0, 0.25};
// Three steps' gradients (fixed, so the references need no model).
const std::vector<std::vector<double>> kGradients = {
    {0.1, -0.2, 0.3, 0.0}, {-0.05, 0.4, 0.1, 0.2}, {0.3, 0.3, -0.3, -0.1}};

std::vector<double> run(Optimizer& optimizer, DType dtype = DType::kF64) {
  Variable w(Tensor::from_vector<double>(kStart, {4}).to(dtype), "w");
  for (const auto& g : kGradients) {
    optimizer.apply_gradients({Tensor::from_vector<double>(g, {4}).to(dtype)}, {w});
  }
  EXPECT_EQ(optimizer.iterations().value().item<int64_t>(), 3);
  return values_of(w.value());
}

TEST(Optimizers, SGDPlainMomentumAndNesterov) {
  for (const double momentum : {0.0, 0.9}) {
    for (const bool nesterov : {false, true}) {
      if (momentum == 0 && nesterov) continue;
      auto sgd = train::SGD({.learning_rate = 0.1, .momentum = momentum, .nesterov = nesterov});
      std::vector<double> w = kStart, v(4, 0.0);
      for (const auto& g : kGradients) {
        for (size_t i = 0; i < 4; ++i) {
          v[i] = momentum * v[i] - 0.1 * g[i];
          w[i] += nesterov ? momentum * v[i] - 0.1 * g[i] : v[i];
        }
      }
      EXPECT_LT(relative_error(run(*sgd), w), 1e-14) << momentum << " " << nesterov;
    }
  }
}

TEST(Optimizers, AdamAndAdamWFollowKerasRule) {
  for (const double decay : {0.0, 0.1}) {
    auto optimizer = decay == 0 ? train::Adam({.learning_rate = 0.01, .epsilon = 1e-7})
                                : train::AdamW({.learning_rate = 0.01, .weight_decay = decay, .epsilon = 1e-7});
    std::vector<double> w = kStart, m(4, 0.0), v(4, 0.0);
    int t = 0;
    for (const auto& g : kGradients) {
      ++t;
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      for (size_t i = 0; i < 4; ++i) {
        w[i] -= w[i] * 0.01 * decay;
        m[i] = 0.9 * m[i] + 0.1 * g[i];
        v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
        w[i] -= alpha * m[i] / (std::sqrt(v[i]) + 1e-7);
      }
    }
    EXPECT_LT(relative_error(run(*optimizer), w), 1e-13) << decay;
    // f32 variables: the step scalars are computed in f64, so f32 stays close.
    auto again = decay == 0 ? train::Adam({.learning_rate = 0.01})
                            : train::AdamW({.learning_rate = 0.01, .weight_decay = decay});
    EXPECT_LT(relative_error(run(*again, DType::kF32), w), 1e-6) << decay;
  }
}

TEST(Optimizers, RMSpropPlainCenteredAndMomentum) {
  for (const bool centered : {false, true}) {
    for (const double momentum : {0.0, 0.5}) {
      auto rms = train::RMSprop({.learning_rate = 0.01, .momentum = momentum, .centered = centered});
      std::vector<double> w = kStart, velocity(4, 0.0), average(4, 0.0), mom(4, 0.0);
      for (const auto& g : kGradients) {
        for (size_t i = 0; i < 4; ++i) {
          velocity[i] = 0.9 * velocity[i] + 0.1 * g[i] * g[i];
          double denominator = velocity[i] + 1e-7;
          if (centered) {
            average[i] = 0.9 * average[i] + 0.1 * g[i];
            denominator -= average[i] * average[i];
          }
          const double increment = 0.01 * g[i] / std::sqrt(denominator);
          if (momentum > 0) {
            mom[i] = momentum * mom[i] + increment;
            w[i] -= mom[i];
          } else {
            w[i] -= increment;
          }
        }
      }
      // Zero gradients with centered: 0/sqrt(eps) stays 0; tolerance covers eps-sized denominators.
      EXPECT_LT(relative_error(run(*rms), w), 1e-12) << centered << " " << momentum;
    }
  }
}

TEST(Optimizers, ClipnormAndGlobalClipnorm) {
  const Tensor a = Tensor::from_vector<double>({3, 4}, {2});      // norm 5
  const Tensor b = Tensor::from_vector<double>({0.3, 0.4}, {2});  // norm 0.5
  auto per_tensor = train::SGD({.clipnorm = 1.0});
  auto clipped = per_tensor->clip_gradients({a, b});
  EXPECT_LT(relative_error(values_of(clipped[0]), {0.6, 0.8}), 1e-15);
  EXPECT_LT(relative_error(values_of(clipped[1]), {0.3, 0.4}), 1e-15);  // under the limit: unchanged
  auto global = train::SGD({.global_clipnorm = 1.0});
  clipped = global->clip_gradients({a, b, Tensor()});
  const double scale = 1.0 / std::sqrt(25.25);
  EXPECT_LT(relative_error(values_of(clipped[0]), {3 * scale, 4 * scale}), 1e-14);
  EXPECT_LT(relative_error(values_of(clipped[1]), {0.3 * scale, 0.4 * scale}), 1e-14);
  EXPECT_FALSE(clipped[2].defined());
  EXPECT_THROW(train::SGD({.clipnorm = 1.0, .global_clipnorm = 1.0}), InvalidArgument);
}

TEST(Schedules, ExponentialCosineAndWarmup) {
  auto exponential = train::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5});
  EXPECT_NEAR(exponential->at(0), 0.1, 1e-15);
  EXPECT_NEAR(exponential->at(15), 0.1 * std::pow(0.5, 1.5), 1e-15);
  auto staircase =
      train::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5, .staircase = true});
  EXPECT_NEAR(staircase->at(19), 0.05, 1e-15);
  EXPECT_NEAR(staircase->at(20), 0.025, 1e-15);

  auto cosine = train::CosineDecay({.initial_learning_rate = 0.2, .decay_steps = 100, .alpha = 0.1});
  for (const int step : {0, 30, 100, 150}) {
    const double progress = std::min(step, 100) / 100.0;
    const double expected = 0.2 * (0.9 * 0.5 * (1 + std::cos(std::numbers::pi * progress)) + 0.1);
    EXPECT_NEAR(cosine->at(step), expected, 1e-15) << step;
  }
  auto warm =
      train::CosineDecay({.initial_learning_rate = 0.0, .decay_steps = 100, .warmup_target = 1.0, .warmup_steps = 10});
  EXPECT_NEAR(warm->at(0), 0.0, 1e-15);
  EXPECT_NEAR(warm->at(5), 0.5, 1e-15);
  EXPECT_NEAR(warm->at(10), 1.0, 1e-15);
  EXPECT_NEAR(warm->at(60), 0.5, 1e-15);
  EXPECT_NEAR(warm->at(110), 0.0, 1e-15);

  // An optimizer reads its schedule at its own step count.
  auto sgd = train::SGD({.learning_rate = exponential});
  Variable w(Tensor::from_vector<double>({1.0}, {1}), "w");
  for (int i = 0; i < 15; ++i) sgd->apply_gradients({Tensor::from_vector<double>({0.0}, {1})}, {w});
  EXPECT_NEAR(sgd->current_learning_rate(), 0.1 * std::pow(0.5, 1.5), 1e-15);
  sgd->apply_gradients({Tensor::from_vector<double>({1.0}, {1})}, {w});
  EXPECT_NEAR(w.value().item<double>(), 1.0 - 0.1 * std::pow(0.5, 1.5), 1e-15);
}

TEST(Optimizers, RefuseVariablesTheyWereNotBuiltFor) {
  auto adam = train::Adam();
  Variable a(Tensor::from_vector<double>({1.0}, {1}), "a"), b(Tensor::from_vector<double>({1.0}, {1}), "b");
  adam->apply_gradients({Tensor::from_vector<double>({1.0}, {1})}, {a});
  EXPECT_THROW(adam->apply_gradients({Tensor::from_vector<double>({1.0}, {1})}, {b}), InvalidArgument);
  EXPECT_THROW(train::get_optimizer("adamax_typo", 0.1), InvalidArgument);
}

}  // namespace
}  // namespace nimbus::testing
