// nimbus::function: tracing once per signature, running the cached graph,
// capturing variables by reference, recording gradients and updates, and the
// errors and warnings around signatures.
#include "nimbus/graph/function.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "nimbus/base/logging.h"
#include "nimbus/nimbus.h"
#include "support/tensor_compare.h"

namespace nimbus {
namespace {

using ::testing::HasSubstr;

using nimbus::testing::bit_identical;

TEST(Function, TracesOncePerSignatureAndMatchesEager) {
  auto body = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(relu(in[0] * 2.0 + in[1]), {1})}; };
  Function f = function(body, {.name = "f", .jit = false});
  const Tensor x = random_normal({4, 5});
  const Tensor y = random_normal({5});
  const Tensor first = f({x, y})[0];
  const Tensor second = f({x, y})[0];
  EXPECT_EQ(f.trace_count(), 1) << "the second call with the same signature must not trace";
  EXPECT_TRUE(bit_identical(first, body({x, y})[0]));
  EXPECT_TRUE(bit_identical(second, first));
  f({random_normal({7, 5}), y});
  EXPECT_EQ(f.trace_count(), 2) << "a new batch size traces once";
  f({random_normal({7, 5}), y});
  EXPECT_EQ(f.trace_count(), 2);
}

TEST(Function, ResultsAreFreshTensorsTheNextCallDoesNotOverwrite) {
  Function f = function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0]) + 1.0}; });
  const Tensor a = f({zeros({3})})[0];
  const Tensor b = f({ones({3})})[0];
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_NE(a.raw_data(), b.raw_data());
}

TEST(Function, CapturesVariablesByReference) {
  Variable w(Tensor::from_vector<float>({1, 2}, {2}), "w");
  Function f = function([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w.value()}; });
  const Tensor x = ones({2});
  EXPECT_EQ(f({x})[0].to_vector<float>(), (std::vector<float>{1, 2}));
  w.assign(Tensor::from_vector<float>({5, 7}, {2}));
  EXPECT_EQ(f({x})[0].to_vector<float>(), (std::vector<float>{5, 7})) << "the graph must read the variable's new value";
  EXPECT_EQ(f.trace_count(), 1);
}

// A training step of a small MLP with its gradient tape and SGD updates inside.
struct Mlp {
  std::vector<Variable> params;
  explicit Mlp(uint64_t seed) {
    Generator gen(seed);
    params = {
        Variable(random_normal({6, 8}, 0, 0.4, DType::kF32, Device::cpu(), &gen), "w1"), Variable(zeros({8}), "b1"),
        Variable(random_normal({8, 3}, 0, 0.4, DType::kF32, Device::cpu(), &gen), "w2"), Variable(zeros({3}), "b2")};
  }
  std::vector<Tensor> step(const std::vector<Tensor>& in) {
    GradientTape tape;
    const Tensor hidden = relu(matmul(in[0], params[0].value()) + params[1].value());
    const Tensor logits = matmul(hidden, params[2].value()) + params[3].value();
    const Tensor loss = mean(sparse_softmax_cross_entropy(logits, in[1]));
    const std::vector<Tensor> grads = tape.gradient(loss, params);
    for (size_t i = 0; i < params.size(); ++i) params[i].assign_sub(grads[i] * 0.5);
    return {loss};
  }
};

TEST(Function, TrainingStepInGraphModeMatchesEagerBitForBit) {
  Generator data_gen(3);
  const Tensor x = random_normal({10, 6}, 0, 1, DType::kF32, Device::cpu(), &data_gen);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {10});
  Mlp eager(1), traced(1);
  Function step =
      function([&](const std::vector<Tensor>& in) { return traced.step(in); }, {.name = "train_step", .jit = false});
  for (int i = 0; i < 5; ++i) {
    const Tensor eager_loss = eager.step({x, labels})[0];
    const Tensor graph_loss = step({x, labels})[0];
    EXPECT_TRUE(bit_identical(eager_loss, graph_loss)) << "step " << i;
  }
  EXPECT_EQ(step.trace_count(), 1);
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(bit_identical(eager.params[i].value(), traced.params[i].value())) << eager.params[i].name();
  }
}

TEST(Function, GraphTextNamesOpsCapturesAndUpdates) {
  Mlp model(1);
  Function step = function([&](const std::vector<Tensor>& in) { return model.step(in); }, {.name = "train_step"});
  const TracedGraph& traced = step.traced_for({zeros({4, 6}), Tensor::from_vector<int64_t>({0, 1, 2, 0}, {4})});
  const std::string text = traced.traced.to_text("train_step");
  EXPECT_THAT(text, HasSubstr("graph train_step {"));
  EXPECT_THAT(text, HasSubstr("= argument 0 : f32[4, 6]"));
  EXPECT_THAT(text, HasSubstr("capture \"w1\" : f32[6, 8]"));
  EXPECT_THAT(text, HasSubstr("matmul("));
  EXPECT_THAT(text, HasSubstr("sparse_softmax_cross_entropy("));
  EXPECT_THAT(text, HasSubstr("  assign(%"));
  EXPECT_THAT(traced.traced.to_dot("train_step"), HasSubstr("digraph \"train_step\""));
  EXPECT_LT(traced.optimized.op_count(), traced.traced.op_count()) << "the passes removed nothing";
}

TEST(Function, InputSignatureRejectsWrongDtypeAndRankNamingBoth) {
  Function f = function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; },
                        {.name = "double_it", .input_signature = std::vector<InputSignature>{{{-1, 3}, DType::kF32}}});
  try {
    f({zeros({2, 3}, DType::kF64)});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("expects inputs (f32[?, 3]), got (f64[2, 3])"));
  }
  EXPECT_THROW(f({zeros({6})}), InvalidArgument);
}

TEST(Function, DynamicBatchDimensionRunsRaggedBatchesWithoutRetracing) {
  Function f = function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0] * 3.0, {1})}; },
                        {.name = "dyn", .input_signature = std::vector<InputSignature>{{{-1, 4}, DType::kF32}}});
  f({ones({8, 4})});
  const Tensor ragged = f({ones({3, 4})})[0];
  f({ones({8, 4})});
  EXPECT_EQ(f.trace_count(), 1);
  EXPECT_EQ(ragged.to_vector<float>(), (std::vector<float>{12, 12, 12}));
}

TEST(Function, WarnsOnceAfterTooManySignaturesNamingTheChange) {
  std::vector<std::string> warnings;
  const LogSink previous = set_log_sink([&](LogLevel level, std::string_view message) {
    if (level == LogLevel::kWarning) warnings.emplace_back(message);
  });
  Function f =
      function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1.0}; }, {.name = "shaky"});
  for (int64_t batch : {128, 127, 126, 125, 124, 96, 95, 94}) f({zeros({batch, 2})});
  set_log_sink(previous);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("'shaky' has traced 6 signatures"));
  EXPECT_THAT(warnings[0], HasSubstr("dim 0 of input 0: 124 -> 96"));
  EXPECT_THAT(warnings[0], HasSubstr("drop_remainder"));
}

TEST(Function, RandomOpsDrawFreshNumbersEveryRun) {
  Generator gen(11);
  Function f = function([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0], 0.5, &gen)}; });
  const Tensor x = ones({64});
  const Tensor first = f({x})[0];
  const Tensor second = f({x})[0];
  EXPECT_FALSE(bit_identical(first, second)) << "a traced dropout reused its mask";
  // The same stream, replayed eagerly: the graph drew exactly what eager code would have
  // (tracing claims nothing, so a function traced again later does not shift the stream).
  Generator replay(11);
  EXPECT_TRUE(bit_identical(first, dropout(x, 0.5, &replay)));
  EXPECT_TRUE(bit_identical(second, dropout(x, 0.5, &replay)));
  EXPECT_EQ(gen.offset(), 128u);
}

TEST(Function, GraphFalseRunsEagerly) {
  int calls = 0;
  Function f = function(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        return std::vector<Tensor>{in[0] + 1.0};
      },
      {.graph = false});
  f({zeros({2})});
  f({zeros({2})});
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(f.trace_count(), 0);
}

TEST(Function, ReadingValuesInsideTheBodyIsAClearError) {
  Function f = function([](const std::vector<Tensor>& in) {
    if (in[0].item<float>() > 0) return std::vector<Tensor>{in[0]};
    return std::vector<Tensor>{-in[0]};
  });
  EXPECT_THROW(f({ones({})}), InvalidArgument);
}

}  // namespace
}  // namespace nimbus
