// Training on the GPU: the MLP and CNN steps that bench_gpu times
// (tests/support/step_models.h), traced into graph mode with fusion on and
// off, take the same path as on the CPU: after a few Adam steps from the same
// initial weights on the same batch, the losses and every parameter agree
// within f32 rounding (cuBLASLt without TF32 against the CPU's GEMMs): losses
// to 1e-4, parameters to 1e-3 in relative L2 norm (Adam's first steps move
// each weight by about the learning rate whatever its gradient's size).
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/device/backend.h"
#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "support/policy_step_models.h"
#include "support/step_models.h"
#include "support/tensor_compare.h"

namespace nimbus {
namespace {

using MakeModel = std::function<std::unique_ptr<testing::Model>(Device)>;

struct Trained {
  std::vector<float> losses;
  std::vector<Tensor> params;  // on the CPU
};

Trained train(const MakeModel& make, Device device, const Tensor& x, const Tensor& labels, bool jit) {
  std::unique_ptr<testing::Model> model = make(device);
  testing::Model* m = model.get();
  Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                           {.name = "train_step", .graph = true, .jit = jit});
  Trained trained;
  for (int t = 1; t <= 4; ++t) {
    const Tensor loss = step({x.to(device), labels.to(device), testing::Adam::step_size(t, 1e-3, device)})[0];
    trained.losses.push_back(loss.to(Device::cpu()).item<float>());
  }
  for (const Variable& p : m->params) trained.params.push_back(p.value().to(Device::cpu()));
  return trained;
}

void expect_gpu_trains_like_the_cpu(const MakeModel& make, const Shape& input) {
  // Running the traced step needs a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the step runs CUDA kernels";
  std::vector<int64_t> dims = {32};
  for (const int64_t d : input.dims()) dims.push_back(d);
  Generator gen(11);
  const Tensor x = random_uniform(Shape(dims), 0, 1, DType::kF32, Device::cpu(), &gen);
  const Tensor labels = cast(random_uniform({32}, 0, 10, DType::kF64, Device::cpu(), &gen), DType::kI64);
  for (const bool jit : {false, true}) {
    SCOPED_TRACE(jit ? "fusion on" : "fusion off");
    const Trained cpu = train(make, Device::cpu(), x, labels, jit);
    const Trained gpu = train(make, Device::cuda(), x, labels, jit);
    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t t = 0; t < cpu.losses.size(); ++t) EXPECT_NEAR(gpu.losses[t], cpu.losses[t], 1e-4) << "step " << t;
    EXPECT_LT(cpu.losses.back(), cpu.losses.front()) << "the reference did not learn: the check would be vacuous";
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      EXPECT_LT(testing::relative_error(gpu.params[i], cpu.params[i]), 1e-3) << "parameter " << i;
    }
  }
}

TEST(CudaTraining, MlpStepsMatchTheCpu) {
  expect_gpu_trains_like_the_cpu([](Device d) { return testing::make_mlp(d, 512); }, Shape{784});
}

TEST(CudaTraining, CnnStepsMatchTheCpu) {
  expect_gpu_trains_like_the_cpu([](Device d) { return testing::make_cnn(d); }, Shape{28, 28, 1});
}

// Under mixed_bfloat16 (tests/support/policy_step_models.h, bench_gpu's mixed-precision rows at a small
// size): the GPU's bf16 kernels (cuBLASLt, cuDNN, bf16 sums and the fused bias pass) against the CPU's,
// fusion on. Both round to bf16 in the same places but accumulate in other orders, so the losses of four
// Adam steps agree to bf16's 1e-2, not f32's 1e-4.
void expect_mixed_gpu_trains_like_the_cpu(const MakeModel& make, const Tensor& x, const Tensor& labels) {
  // Running the traced step needs a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the step runs CUDA kernels";
  const Trained cpu = train(make, Device::cpu(), x, labels, /*jit=*/true);
  const Trained gpu = train(make, Device::cuda(), x, labels, /*jit=*/true);
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t t = 0; t < cpu.losses.size(); ++t) {
    EXPECT_NEAR(gpu.losses[t], cpu.losses[t], 1e-2 * std::abs(cpu.losses[t])) << "step " << t;
  }
  EXPECT_LT(cpu.losses.back(), cpu.losses.front()) << "the reference did not learn: the check would be vacuous";
}

TEST(CudaTraining, MixedBf16TransformerBlockStepsMatchTheCpu) {
  const testing::TransformerBlockSize small{.d_model = 64, .heads = 4, .sequence = 16, .feed_forward = 256};
  Generator gen(12);
  const Shape shape{2, small.sequence, small.d_model};
  const Tensor x = random_normal(shape, 0, 1, DType::kF32, Device::cpu(), &gen);
  const Tensor target = random_normal(shape, 0, 1, DType::kF32, Device::cpu(), &gen);
  expect_mixed_gpu_trains_like_the_cpu(
      [&](Device d) { return testing::make_transformer_block(small, "mixed_bfloat16", d); }, x, target);
}

TEST(CudaTraining, MixedBf16LayerCnnStepsMatchTheCpu) {
  Generator gen(13);
  const Tensor x = random_uniform({32, 28, 28, 1}, 0, 1, DType::kF32, Device::cpu(), &gen);
  const Tensor labels = cast(random_uniform({32}, 0, 10, DType::kF64, Device::cpu(), &gen), DType::kI64);
  expect_mixed_gpu_trains_like_the_cpu([](Device d) { return testing::make_layer_cnn("mixed_bfloat16", d); }, x,
                                       labels);
}

}  // namespace
}  // namespace nimbus
