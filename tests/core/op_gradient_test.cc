// OpGrad: for every case of a differentiable op, gradients from the tape
// against central finite differences, all in f64.
//
// The loss is L = sum_k sum(w_k * output_k) with fixed random weights w_k, so
// every output element's gradient matters. For each floating input element,
// dL/dx ~ (L(x + h) - L(x - h)) / 2h with h = 1e-6 (truncation error O(h^2),
// rounding error O(1e-16 / h)), so the two agree to about 1e-9.
// Error bar: |autodiff - numeric| <= grad_tolerance * max(1, |numeric|) per
// element, with grad_tolerance 1e-6 unless the case states otherwise.
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/rng.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "op_harness.h"

namespace nimbus::testing {
namespace {

// Cases of differentiable ops with something to differentiate: a floating input.
std::vector<OpCase> differentiable_cases() {
  std::vector<OpCase> result;
  for (const OpCase& c : op_cases()) {
    const OpSchema* op = OpRegistry::global().find(c.op);
    const bool floating_input =
        std::any_of(c.inputs.begin(), c.inputs.end(), [](const InputSpec& spec) { return is_floating(spec.dtype); });
    if (op != nullptr && op->differentiable && floating_input && c.check_gradient) result.push_back(c);
  }
  return result;
}

class OpGrad : public ::testing::TestWithParam<OpCase> {};

// The scalar loss over the chosen outputs with fixed weights.
class Loss {
 public:
  Loss(const OpCase& c, const std::vector<Tensor>& outputs) : case_(c) {
    Generator gen(12345);
    for (size_t k = 0; k < outputs.size(); ++k) {
      weights_.push_back(chosen(outputs, k) ? random_normal(outputs[k].shape(), 0, 1, DType::kF64, Device::cpu(), &gen)
                                            : Tensor());
    }
  }

  bool chosen(const std::vector<Tensor>& outputs, size_t k) const {
    if (!is_floating(outputs[k].dtype())) return false;
    if (case_.loss_outputs.empty()) return true;
    return std::find(case_.loss_outputs.begin(), case_.loss_outputs.end(), static_cast<int>(k)) !=
           case_.loss_outputs.end();
  }

  Tensor operator()(const std::vector<Tensor>& outputs) const {
    Tensor total = zeros({}, DType::kF64);
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (weights_[k].defined()) total = add(total, sum(mul(outputs[k], weights_[k])));
    }
    return total;
  }

 private:
  const OpCase& case_;
  std::vector<Tensor> weights_;
};

TEST_P(OpGrad, MatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> inputs = make_inputs(c, DType::kF64);

  GradientTape tape;
  for (const Tensor& input : inputs) tape.watch(input);
  const std::vector<Tensor> outputs = run_case(c, inputs);
  const Loss loss_fn(c, outputs);
  const Tensor loss = loss_fn(outputs);
  const std::vector<Tensor> grads = tape.gradient(loss, inputs, {}, UnconnectedGradients::kZero);

  constexpr double kStep = 1e-6;
  bool checked_any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_floating(inputs[i].dtype())) continue;
    checked_any = true;
    ASSERT_TRUE(grads[i].defined()) << "input " << i;
    ASSERT_EQ(grads[i].shape(), inputs[i].shape()) << "input " << i;
    const std::vector<double> analytic = grads[i].to_vector<double>();
    const std::vector<double> base = inputs[i].to_vector<double>();
    for (size_t j = 0; j < base.size(); ++j) {
      auto loss_at = [&](double value) {
        std::vector<double> perturbed = base;
        perturbed[j] = value;
        std::vector<Tensor> shifted = inputs;
        shifted[i] = Tensor::from_vector<double>(perturbed, inputs[i].shape());
        return loss_fn(run_case(c, shifted)).item<double>();
      };
      const double numeric = (loss_at(base[j] + kStep) - loss_at(base[j] - kStep)) / (2 * kStep);
      const double error = std::abs(analytic[j] - numeric);
      ASSERT_LE(error, c.grad_tolerance * std::max(1.0, std::abs(numeric)))
          << c.op << ": d loss / d input " << i << " element " << j << ": autodiff " << analytic[j]
          << " vs finite differences " << numeric;
    }
  }
  EXPECT_TRUE(checked_any);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGrad, ::testing::ValuesIn(differentiable_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nimbus::testing
