// GradientTape semantics (TensorFlow's model): what gets watched, how many
// gradient() calls a tape allows, nesting, pausing, unconnected sources,
// output-gradient seeding, accumulation, and an end-to-end check of a
// two-layer MLP's gradients against finite differences in f64.
#include "nimbus/autodiff/gradient_tape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nimbus/autodiff/variable.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor f64(const std::vector<double>& values, const Shape& shape) { return Tensor::from_vector(values, shape); }
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

TEST(GradientTape, UnwatchedTensorsGetUndefinedGradients) {
  const Tensor x = f64({1, 2, 3}, {3});
  const Tensor y = f64({4, 5, 6}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor loss = sum(x * y);
  const auto grads = tape.gradient(loss, {x, y});
  EXPECT_THAT(values(grads[0]), ElementsAre(4, 5, 6));
  EXPECT_FALSE(grads[1].defined()) << "y was never watched, although it meets x in a recorded op";
}

TEST(GradientTape, UnwatchedTargetAsItsOwnSourceHasNoGradient) {
  const Tensor x = f64({3, 4}, {2});
  GradientTape tape;
  EXPECT_FALSE(tape.gradient(x, {x})[0].defined());
}

TEST(GradientTape, NothingWatchedRecordsNothing) {
  const Tensor x = f64({1, 2}, {2});
  GradientTape tape;
  const Tensor loss = sum(x * x);
  EXPECT_EQ(tape.num_recorded(), 0u);
  EXPECT_FALSE(tape.gradient(loss, {x})[0].defined());
}

TEST(GradientTape, TrainableVariablesAreWatchedWhenRead) {
  Variable w(f64({2, 3}, {2}), "w");
  GradientTape tape;
  const Tensor loss = sum(w.value() * w.value());
  EXPECT_THAT(values(tape.gradient(loss, std::vector<Variable>{w})[0]), ElementsAre(4, 6));
}

TEST(GradientTape, NonTrainableVariablesAreNotWatched) {
  Variable w(f64({2, 3}, {2}), "w");
  Variable frozen(f64({5, 7}, {2}), "frozen", /*trainable=*/false);
  GradientTape tape;
  const Tensor loss = sum(w.value() * frozen.value());
  const auto grads = tape.gradient(loss, std::vector<Variable>{w, frozen});
  EXPECT_THAT(values(grads[0]), ElementsAre(5, 7));
  EXPECT_FALSE(grads[1].defined()) << "a frozen variable gets no gradient, as in TensorFlow";
  GradientTape zero_tape;
  const Tensor loss2 = sum(w.value() * frozen.value());
  const auto zeros = zero_tape.gradient(loss2, std::vector<Variable>{frozen}, {}, UnconnectedGradients::kZero);
  EXPECT_THAT(values(zeros[0]), ElementsAre(0, 0));
}

TEST(GradientTape, WatchAccessedVariablesFalseWatchesOnlyWhatIsAsked) {
  Variable a(f64({1, 2}, {2}), "a");
  Variable b(f64({3, 4}, {2}), "b");
  GradientTape tape(/*persistent=*/false, /*watch_accessed_variables=*/false);
  tape.watch(b);
  const Tensor loss = sum(a.value() * b.value());
  const auto grads = tape.gradient(loss, std::vector<Variable>{a, b});
  EXPECT_FALSE(grads[0].defined());
  EXPECT_THAT(values(grads[1]), ElementsAre(1, 2));
}

TEST(GradientTape, NonTrainableVariableCanBeWatchedExplicitly) {
  Variable frozen(f64({5, 7}, {2}), "frozen", /*trainable=*/false);
  GradientTape tape;
  tape.watch(frozen);
  const Tensor loss = sum(frozen.value() * frozen.value());
  EXPECT_THAT(values(tape.gradient(loss, std::vector<Variable>{frozen})[0]), ElementsAre(10, 14));
}

TEST(GradientTape, VariableReadBeforeTheTapeIsNotWatched) {
  Variable w(f64({2}, {1}), "w");
  const Tensor read_early = w.value() * 3.0;
  GradientTape tape;
  const Tensor loss = sum(read_early);
  EXPECT_FALSE(tape.gradient(loss, std::vector<Variable>{w})[0].defined());
}

TEST(GradientTape, NonPersistentTapeAllowsOneGradientCall) {
  const Tensor x = f64({3}, {1});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = sum(x * x);
  EXPECT_THAT(values(tape.gradient(y, {x})[0]), ElementsAre(6));
  EXPECT_EQ(tape.num_recorded(), 0u) << "a non-persistent tape frees what it recorded";
  try {
    tape.gradient(y, {x});
    FAIL() << "second gradient() call on a non-persistent tape";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), HasSubstr("twice"));
    EXPECT_THAT(e.hint(), HasSubstr("persistent"));
  }
}

TEST(GradientTape, PersistentTapeAllowsSeveralGradientCalls) {
  const Tensor x = f64({3}, {1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;
  const Tensor z = y * x;
  EXPECT_THAT(values(tape.gradient(sum(y), {x})[0]), ElementsAre(6));
  EXPECT_THAT(values(tape.gradient(sum(z), {x})[0]), ElementsAre(27));
  EXPECT_THAT(values(tape.gradient(sum(z), {y})[0]), ElementsAre(3));
}

TEST(GradientTape, NestedTapesBothRecordAndTheOuterSeesTheInnerGradient) {
  const Tensor x = f64({2}, {1});
  GradientTape outer;
  outer.watch(x);
  Tensor dy_dx;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = x * x * x;
    dy_dx = inner.gradient(sum(y), {x})[0];  // 3 x^2
  }
  EXPECT_THAT(values(dy_dx), ElementsAre(12));
  // The inner gradient computation ran ops on x that the outer tape recorded.
  EXPECT_THAT(values(outer.gradient(sum(dy_dx), {x})[0]), ElementsAre(12));  // 6 x
}

TEST(GradientTape, InnerTapeDoesNotSeeOpsBeforeItExisted) {
  const Tensor x = f64({2}, {1});
  GradientTape outer;
  outer.watch(x);
  const Tensor y = x * x;
  GradientTape inner;
  inner.watch(y);
  const Tensor z = y * 3.0;
  const auto inner_grads = inner.gradient(sum(z), {y, x});
  EXPECT_THAT(values(inner_grads[0]), ElementsAre(3));
  EXPECT_FALSE(inner_grads[1].defined()) << "x -> y happened before the inner tape";
  EXPECT_THAT(values(outer.gradient(sum(z), {x})[0]), ElementsAre(12));
}

TEST(GradientTape, PausedTapeRecordsNothing) {
  const Tensor x = f64({2}, {1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor recorded = x * 3.0;
  tape.pause();
  const Tensor hidden = x * 5.0;
  tape.resume();
  const Tensor after = x * 7.0;
  EXPECT_THAT(values(tape.gradient(sum(recorded + hidden + after), {x})[0]), ElementsAre(10));
  EXPECT_FALSE(tape.gradient(sum(hidden), {x})[0].defined());
}

TEST(GradientTape, UnconnectedSourcesAreUndefinedOrZero) {
  const Tensor x = f64({1, 2}, {2});
  const Tensor unrelated = f64({1, 2, 3}, {3});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(unrelated);
  const Tensor loss = sum(x * 2.0);
  EXPECT_FALSE(tape.gradient(loss, {unrelated})[0].defined());
  const Tensor zero = tape.gradient(loss, {unrelated}, {}, UnconnectedGradients::kZero)[0];
  ASSERT_TRUE(zero.defined());
  EXPECT_EQ(zero.shape(), unrelated.shape());
  EXPECT_THAT(values(zero), ElementsAre(0, 0, 0));
}

TEST(GradientTape, OutputGradientSeedsTheTarget) {
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;  // dy/dx = 2x, elementwise
  EXPECT_THAT(values(tape.gradient(y, {x})[0]), ElementsAre(2, 4, 6)) << "no seed: ones (sum of y)";
  const Tensor seed = f64({1, 0, -2}, {3});
  EXPECT_THAT(values(tape.gradient(y, {x}, seed)[0]), ElementsAre(2, 0, -12));
}

TEST(GradientTape, OutputGradientMustMatchTheTarget) {
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;
  try {
    tape.gradient(y, {x}, f64({1, 1}, {2}));
    FAIL() << "a [2] seed for a [3] target";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("output_gradient"), HasSubstr("[2]"), HasSubstr("[3]")));
  }
  EXPECT_THROW(tape.gradient(y, {x}, Tensor::from_vector<float>({1, 1, 1}, {3})), InvalidArgument)
      << "an f32 seed for an f64 target";
  EXPECT_THROW(tape.gradient(Tensor(), {x}), InvalidArgument) << "undefined target";
}

TEST(GradientTape, SeveralTargetsGiveTheGradientOfTheirSum) {
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor square = x * x;        // d/dx = 2x
  const Tensor total = sum(x * 3.0);  // d/dx = 3
  EXPECT_THAT(values(tape.gradient(std::vector<Tensor>{square, total}, {x})[0]), ElementsAre(5, 7, 9));
  // A seed per target, undefined ones meaning ones; the same target twice counts twice.
  const auto seeded = tape.gradient(std::vector<Tensor>{square, total}, {x}, {f64({1, 0, -1}, {3}), Tensor()});
  EXPECT_THAT(values(seeded[0]), ElementsAre(5, 3, -3));
  EXPECT_THAT(values(tape.gradient(std::vector<Tensor>{total, total}, {x})[0]), ElementsAre(6, 6, 6));
  EXPECT_THROW(tape.gradient(std::vector<Tensor>{square, total}, {x}, {Tensor()}), InvalidArgument)
      << "one seed for two targets";
}

TEST(GradientTape, WatchedVariablesInTheOrderTheyWereWatched) {
  Variable a(f64({1}, {1}), "a");
  Variable b(f64({2}, {1}), "b");
  Variable frozen(f64({3}, {1}), "frozen", /*trainable=*/false);
  GradientTape tape;
  tape.watch(frozen);
  const Tensor y = b.value() * a.value() + b.value() * frozen.value();
  ASSERT_EQ(tape.watched_variables().size(), 3u);
  EXPECT_TRUE(tape.watched_variables()[0].same_as(frozen));
  EXPECT_TRUE(tape.watched_variables()[1].same_as(b));
  EXPECT_TRUE(tape.watched_variables()[2].same_as(a));
}

TEST(GradientTape, RejectedCallDoesNotUseUpANonPersistentTape) {
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  EXPECT_THROW(tape.gradient(y, {x}, f64({1, 1}, {2})), InvalidArgument);
  // The mistake is reported as what it is, and the corrected call still works.
  EXPECT_THAT(values(tape.gradient(y, {x})[0]), ElementsAre(2, 4, 6));
}

TEST(GradientTape, GradientsAccumulateOverEveryUse) {
  const Tensor x = f64({3, -1}, {2});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  EXPECT_THAT(values(tape.gradient(sum(x * x), {x})[0]), ElementsAre(6, -2));
  const Tensor y = x * 2.0 + x * x * x;  // 2 + 3 x^2
  EXPECT_THAT(values(tape.gradient(sum(y), {x})[0]), ElementsAre(29, 5));
}

TEST(GradientTape, TargetThatIsASourceHasGradientOne) {
  const Tensor x = f64({3, 4}, {2});
  GradientTape tape;
  tape.watch(x);
  EXPECT_THAT(values(tape.gradient(x, {x})[0]), ElementsAre(1, 1));
}

TEST(GradientTape, IntegerInputsGetNoGradient) {
  const Tensor counts = Tensor::from_vector<int64_t>({2, 3}, {2});
  const Tensor x = f64({1.5, -1}, {2});
  GradientTape tape;
  tape.watch(counts);
  tape.watch(x);
  const Tensor loss = sum(cast(counts, DType::kF64) * x);
  const auto grads = tape.gradient(loss, {counts, x});
  EXPECT_FALSE(grads[0].defined()) << "i64 input";
  EXPECT_THAT(values(grads[1]), ElementsAre(2, 3));
}

TEST(GradientTape, StopGradientBlocksTheFlow) {
  const Tensor x = f64({2}, {1});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * stop_gradient(x * 5.0);  // d/dx = 5x, not 10x
  EXPECT_THAT(values(tape.gradient(sum(y), {x})[0]), ElementsAre(10));
}

TEST(GradientTape, GradientsHaveTheSourcesShapeAndDtype) {
  const Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<float>({1, 2, 3}, {3});
  GradientTape tape;
  tape.watch(w);
  tape.watch(b);
  const Tensor loss = mean(w + b);  // b broadcasts over rows
  const auto grads = tape.gradient(loss, {w, b});
  EXPECT_EQ(grads[0].shape(), w.shape());
  EXPECT_EQ(grads[0].dtype(), DType::kF32);
  EXPECT_EQ(grads[1].shape(), b.shape());
  for (float g : grads[1].to_vector<float>()) EXPECT_FLOAT_EQ(g, 2.0f / 6.0f);
}

// ---- a two-layer MLP against finite differences ----

struct Mlp {
  Variable w1, b1, w2, b2;
  Tensor x, labels;

  Tensor loss() const {
    const Tensor hidden = tanh(matmul(x, w1.value()) + b1.value());
    const Tensor logits = matmul(hidden, w2.value()) + b2.value();
    return mean(sparse_softmax_cross_entropy(logits, labels));
  }
};

TEST(GradientTape, TwoLayerMlpMatchesFiniteDifferences) {
  Generator gen(31);
  Mlp mlp{Variable(random_normal({4, 6}, 0, 0.7, DType::kF64, Device::cpu(), &gen), "w1"),
          Variable(random_normal({6}, 0, 0.3, DType::kF64, Device::cpu(), &gen), "b1"),
          Variable(random_normal({6, 3}, 0, 0.7, DType::kF64, Device::cpu(), &gen), "w2"),
          Variable(random_normal({3}, 0, 0.3, DType::kF64, Device::cpu(), &gen), "b2"),
          random_normal({5, 4}, 0, 1, DType::kF64, Device::cpu(), &gen),
          Tensor::from_vector<int64_t>({0, 2, 1, 2, 0}, {5})};
  const std::vector<Variable> params{mlp.w1, mlp.b1, mlp.w2, mlp.b2};

  std::vector<Tensor> grads;
  {
    GradientTape tape;
    grads = tape.gradient(mlp.loss(), params);
  }
  // Central differences, h = 1e-6: truncation O(h^2) and rounding O(1e-16 / h)
  // errors are both near 1e-10, so autodiff must agree to 1e-8.
  constexpr double kStep = 1e-6;
  for (size_t p = 0; p < params.size(); ++p) {
    ASSERT_TRUE(grads[p].defined()) << params[p].name();
    ASSERT_EQ(grads[p].shape(), params[p].shape());
    const std::vector<double> analytic = values(grads[p]);
    const std::vector<double> original = values(params[p].value());
    double largest = 0;
    for (size_t j = 0; j < original.size(); ++j) {
      auto loss_with = [&](double v) {
        std::vector<double> changed = original;
        changed[j] = v;
        Variable param = params[p];
        param.assign(f64(changed, param.shape()));
        return mlp.loss().item<double>();
      };
      const double numeric = (loss_with(original[j] + kStep) - loss_with(original[j] - kStep)) / (2 * kStep);
      Variable param = params[p];
      param.assign(f64(original, param.shape()));
      EXPECT_NEAR(analytic[j], numeric, 1e-8) << params[p].name() << " element " << j;
      largest = std::max(largest, std::abs(numeric));
    }
    EXPECT_GT(largest, 1e-3) << params[p].name() << ": gradients this small would not test anything";
  }
}

}  // namespace
}  // namespace nimbus
