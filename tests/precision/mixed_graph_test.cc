// What mixed precision does to a traced train step: under mixed_float16 and
// mixed_bfloat16 the variables (captures) stay f32, the matmuls and
// convolutions (forward and backward) and the activations between them are in
// the compute dtype, softmax cross-entropy and the updates are f32, and the
// fusion pass merges the casts into fused elementwise kernels.
#include <gtest/gtest.h>

#include <string>

#include "nimbus/graph/function.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/train/trainer.h"
#include "tests/support/policy_scope.h"

namespace nimbus {
namespace {

struct DTypeCounts {
  int matmuls = 0, matmuls_in_compute = 0;
  int convolutions = 0, convolutions_in_compute = 0;
  int relus = 0, relus_in_compute = 0;
  int casts = 0;
};

DTypeCounts inspect(const graph::Graph& graph, DType compute) {
  DTypeCounts counts;
  for (const graph::Node& node : graph.nodes()) {
    if (node.removed) continue;
    if (node.kind == graph::NodeKind::kCapture && node.trainable) {
      EXPECT_EQ(node.outputs[0].dtype, DType::kF32) << "variable " << node.name;
    }
    if (node.kind != graph::NodeKind::kOp) continue;
    const std::string& op = node.op->name;
    const DType out = node.outputs.empty() ? DType::kF32 : node.outputs[0].dtype;
    auto tally = [&](int& total, int& in_compute) {
      ++total;
      if (out == compute) ++in_compute;
    };
    if (op == "matmul") tally(counts.matmuls, counts.matmuls_in_compute);
    if (op.rfind("conv2d", 0) == 0) tally(counts.convolutions, counts.convolutions_in_compute);
    if (op == "relu") tally(counts.relus, counts.relus_in_compute);
    if (op == "cast") ++counts.casts;
    if (op == "sparse_softmax_cross_entropy") {
      EXPECT_EQ(out, DType::kF32) << "the loss";
      EXPECT_EQ(graph.spec(node.inputs[0]).dtype, DType::kF32) << "the logits the loss reads";
    }
    if (op == "assign") {
      EXPECT_EQ(graph.spec(node.inputs[1]).dtype, graph.spec(node.inputs[0]).dtype);
    }
  }
  return counts;
}

// Adam unfused here: its elementwise update reads the gradients' casts to f32, which fusion
// folds into its programs (the fused adam_update and the loss's gradient op read them whole).
train::Trainer compile_for_test(const nn::Model& model) {
  return train::compile(model, {.optimizer = train::Adam({.fused = false}),
                                .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                .metrics = {"accuracy"}});
}

class MixedGraph : public ::testing::TestWithParam<const char*> {};

TEST_P(MixedGraph, VariablesStayF32AndMatmulsAndActivationsUseTheComputeDtype) {
  const testing::GlobalPolicyScope policy(GetParam());
  const DType compute = nn::DTypePolicy::named(GetParam()).compute_dtype;
  nn::Sequential model({nn::InputLayer({12}), nn::Dense(16, {.activation = "relu"}), nn::Dense(4)});
  train::Trainer trainer = compile_for_test(model);
  EXPECT_EQ(trainer.loss_scale() != nullptr, compute == DType::kF16);
  const Tensor x = random_uniform({8, 12}, -1, 1);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  const TracedGraph& traced = trainer.trace_train_step(x, y, 1, /*jit=*/true);
  const DTypeCounts counts = inspect(traced.traced, compute);
  // Two forward matmuls and their gradients (the first layer's input needs none).
  EXPECT_GE(counts.matmuls, 5);
  EXPECT_EQ(counts.matmuls_in_compute, counts.matmuls);
  EXPECT_GE(counts.relus, 1);
  EXPECT_EQ(counts.relus_in_compute, counts.relus);
  EXPECT_GT(counts.casts, 0);
  // The model's output is f32 (the step's loss output too).
  EXPECT_EQ(model(x, false).dtype(), DType::kF32);
  EXPECT_EQ(traced.traced.spec(traced.traced.outputs()[0]).dtype, DType::kF32);

  // Fusion merges casts into fused elementwise kernels: fewer standalone casts, and programs that cast.
  int standalone_casts = 0, fused_casts = 0;
  for (const graph::Node& node : traced.optimized.nodes()) {
    if (node.kind != graph::NodeKind::kOp) continue;
    if (node.op->name == "cast") ++standalone_casts;
    if (node.op == &fused_elementwise_op()) {
      const std::string program = node.attrs.get_object("program")->to_string();
      for (size_t at = program.find("cast("); at != std::string::npos; at = program.find("cast(", at + 1)) {
        ++fused_casts;
      }
    }
  }
  EXPECT_GT(fused_casts, 0);
  EXPECT_LT(standalone_casts, counts.casts);
}

TEST_P(MixedGraph, ConvolutionsUseTheComputeDtype) {
  const testing::GlobalPolicyScope policy(GetParam());
  const DType compute = nn::DTypePolicy::named(GetParam()).compute_dtype;
  nn::Sequential model(
      {nn::InputLayer({8, 8, 2}), nn::Conv2D(4, {3, 3}, {.activation = "relu"}), nn::Flatten(), nn::Dense(3)});
  train::Trainer trainer = compile_for_test(model);
  const Tensor x = random_uniform({4, 8, 8, 2}, -1, 1);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0}, {4});
  const DTypeCounts counts = inspect(trainer.trace_train_step(x, y, 1, /*jit=*/false).traced, compute);
  EXPECT_GE(counts.convolutions, 2);  // forward and the filter's gradient
  EXPECT_EQ(counts.convolutions_in_compute, counts.convolutions);
}

TEST(MixedGraph, APerLayerFloat32PolicyKeepsThatLayerInF32) {
  const testing::GlobalPolicyScope policy("mixed_float16");
  nn::Layer hidden = nn::Dense(16, {.activation = "relu"});
  nn::Layer head = nn::Dense(4);
  head->dtype_policy = nn::DTypePolicy::named("float32");
  EXPECT_EQ(hidden->dtype_policy.name, "mixed_float16");
  nn::Sequential model({nn::InputLayer({12}), hidden, head});
  const Tensor x = random_uniform({8, 12}, -1, 1);
  EXPECT_EQ(hidden(x).dtype(), DType::kF16);
  EXPECT_EQ(head(hidden(x)).dtype(), DType::kF32);
  EXPECT_EQ(model(x, false).dtype(), DType::kF32);
}

INSTANTIATE_TEST_SUITE_P(Policies, MixedGraph, ::testing::Values("mixed_float16", "mixed_bfloat16"));

TEST(DTypePolicy, NamesAndErrors) {
  EXPECT_FALSE(nn::DTypePolicy::named("float32").is_mixed());
  EXPECT_TRUE(nn::DTypePolicy::named("mixed_float16").needs_loss_scaling());
  EXPECT_FALSE(nn::DTypePolicy::named("mixed_bfloat16").needs_loss_scaling());
  EXPECT_EQ(nn::DTypePolicy::named("mixed_bfloat16").variable_dtype, DType::kF32);
  try {
    nn::DTypePolicy::named("mixed_float8");
    FAIL() << "no error";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("mixed_float8"), std::string::npos);
    EXPECT_NE(error.hint().find("mixed_bfloat16"), std::string::npos);
  }
}

}  // namespace
}  // namespace nimbus
