// Each pass on hand-built graphs, and the bit-identical results the passes
// must keep.
#include "nimbus/graph/passes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "nimbus/graph/executor.h"
#include "nimbus/graph/memory_plan.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "support/tensor_compare.h"

namespace nimbus::graph {
namespace {

using ::testing::HasSubstr;

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }

TensorSpec f32(std::initializer_list<int64_t> dims) { return {Shape(dims), DType::kF32}; }

// Runs the graph (planned without reuse, so the plan cannot hide a pass's bug).
std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& arguments) {
  Executor executor(graph, plan_memory(graph, {.reuse = false}), Device::cpu());
  return executor.run(arguments);
}

using nimbus::testing::bit_identical;

int binary(Graph& g, const char* name, ValueRef a, ValueRef b, const TensorSpec& out) {
  return g.add_op(op(name), {}, {a, b}, {out});
}

TEST(ConstantFolding, FoldsOpsOfConstantsAndSourcesButNotCapturesOrRandom) {
  Graph g;
  const int x = g.add_argument(0, f32({3}));
  const int two =
      g.add_op(op("fill"), Attrs{{"shape", Shape{3}}, {"dtype", DType::kF32}, {"value", 2.0}}, {}, {f32({3})});
  const int three = g.add_constant(full({3}, 3.0));
  const int six = binary(g, "mul", {two, 0}, {three, 0}, f32({3}));
  const int captured = g.add_capture(ones({3}), "w");
  const int not_folded = binary(g, "add", {six, 0}, {captured, 0}, f32({3}));
  const int noise = g.add_op(op("random_uniform"),
                             Attrs{{"shape", Shape{3}},
                                   {"dtype", DType::kF32},
                                   {"generator", int64_t{0}},
                                   {"seed", int64_t{1}},
                                   {"offset", int64_t{0}},
                                   {"low", 0.0},
                                   {"high", 1.0}},
                             {}, {f32({3})});
  const int out = binary(g, "add", {x, 0}, {not_folded, 0}, f32({3}));
  g.outputs() = {{out, 0}, {noise, 0}};
  EXPECT_EQ(fold_constants(g), 2);  // fill and mul
  EXPECT_EQ(g.node(six).kind, NodeKind::kConstant);
  EXPECT_EQ(g.node(six).value.to_vector<float>(), (std::vector<float>{6, 6, 6}));
  EXPECT_EQ(g.node(not_folded).kind, NodeKind::kOp) << "a capture is not a constant";
  EXPECT_EQ(g.node(noise).kind, NodeKind::kOp) << "random ops never fold";
}

TEST(CommonSubexpressions, MergesEqualOpsButNotAcrossAnAssignToTheirInput) {
  Graph g;
  const int x = g.add_argument(0, f32({2}));
  const int w = g.add_capture(ones({2}), "w");
  const int a = binary(g, "mul", {x, 0}, {w, 0}, f32({2}));
  const int b = binary(g, "mul", {x, 0}, {w, 0}, f32({2}));  // same as a
  const int sum_ab = binary(g, "add", {a, 0}, {b, 0}, f32({2}));
  g.add_op(op("assign"), {}, {{w, 0}, {sum_ab, 0}}, {});
  const int c = binary(g, "mul", {x, 0}, {w, 0}, f32({2}));  // reads the updated w: not a
  g.outputs() = {{sum_ab, 0}, {c, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 1);
  EXPECT_TRUE(g.node(b).removed);
  EXPECT_EQ(g.node(sum_ab).inputs[1].node, a);
  EXPECT_FALSE(g.node(c).removed);
}

TEST(DeadCode, RemovesUnusedNodesButKeepsSideEffectsAndArguments) {
  Graph g;
  const int x = g.add_argument(0, f32({2}));
  const int unused_arg = g.add_argument(1, f32({2}));
  const int dead = g.add_op(op("exp"), {}, {{x, 0}}, {f32({2})});
  const int w = g.add_capture(ones({2}), "w");
  const int update = binary(g, "add", {w, 0}, {x, 0}, f32({2}));
  const int assign = g.add_op(op("assign"), {}, {{w, 0}, {update, 0}}, {});
  const int out = g.add_op(op("neg"), {}, {{x, 0}}, {f32({2})});
  g.outputs() = {{out, 0}};
  EXPECT_EQ(eliminate_dead_code(g), 1);
  EXPECT_TRUE(g.node(dead).removed);
  EXPECT_FALSE(g.node(assign).removed);
  EXPECT_FALSE(g.node(update).removed);
  EXPECT_FALSE(g.node(unused_arg).removed);
  g.compact();
  EXPECT_EQ(g.op_count(), 3);
}

TEST(AlgebraicSimplification, RemovesIdentitiesAndCollapsesChains) {
  Graph g;
  const int x = g.add_argument(0, f32({2, 3}));
  const int one = g.add_constant(ones({}));
  const int zero = g.add_constant(zeros({3}));
  const int times_one = binary(g, "mul", {x, 0}, {one, 0}, f32({2, 3}));
  const int plus_zero = binary(g, "add", {zero, 0}, {times_one, 0}, f32({2, 3}));
  const int t1 =
      g.add_op(op("transpose"), Attrs{{"perm", std::vector<int64_t>{1, 0}}}, {{plus_zero, 0}}, {f32({3, 2})});
  const int t2 = g.add_op(op("transpose"), Attrs{{"perm", std::vector<int64_t>{1, 0}}}, {{t1, 0}}, {f32({2, 3})});
  const int r1 = g.add_op(op("reshape"), Attrs{{"shape", Shape{6}}}, {{t2, 0}}, {f32({6})});
  const int r2 = g.add_op(op("reshape"), Attrs{{"shape", Shape{3, 2}}}, {{r1, 0}}, {f32({3, 2})});
  // A broadcasting "identity" must stay: x (3) + zeros (2, 3) has a bigger shape than x.
  const int y = g.add_argument(1, f32({3}));
  const int zeros23 = g.add_constant(zeros({2, 3}));
  const int widened = binary(g, "add", {y, 0}, {zeros23, 0}, f32({2, 3}));
  g.outputs() = {{r2, 0}, {widened, 0}};
  const Tensor xv = random_normal({2, 3});
  const Tensor yv = random_normal({3});
  const std::vector<Tensor> before = run(g, {xv, yv});
  simplify_algebra(g);
  eliminate_dead_code(g);
  g.compact();
  // Left: the single reshape of x, and the broadcasting add.
  EXPECT_EQ(g.op_count(), 2) << g.to_text();
  const std::vector<Tensor> after = run(g, {xv, yv});
  EXPECT_TRUE(bit_identical(before[0], after[0]));
  EXPECT_TRUE(bit_identical(before[1], after[1]));
}

TEST(AlgebraicSimplification, ComposesTransposePermutations) {
  Graph g;
  const int x = g.add_argument(0, f32({2, 3, 4}));
  const int t1 = g.add_op(op("transpose"), Attrs{{"perm", std::vector<int64_t>{1, 2, 0}}}, {{x, 0}}, {f32({3, 4, 2})});
  const int t2 = g.add_op(op("transpose"), Attrs{{"perm", std::vector<int64_t>{0, 2, 1}}}, {{t1, 0}}, {f32({3, 2, 4})});
  g.outputs() = {{t2, 0}};
  const Tensor xv = random_normal({2, 3, 4});
  const Tensor before = run(g, {xv})[0];
  simplify_algebra(g);
  eliminate_dead_code(g);
  g.compact();
  EXPECT_EQ(g.op_count(), 1);
  EXPECT_TRUE(bit_identical(before, run(g, {xv})[0]));
}

// ---- in-place updates ----

TEST(InPlaceUpdates, FoldsAnUpdateIntoTheOpComputingIt) {
  Graph g;
  const int grad = g.add_argument(0, f32({4}));
  const int w = g.add_capture(Tensor::from_vector<float>({1, 2, 3, 4}, {4}), "w");
  const int updated = binary(g, "sub", {w, 0}, {grad, 0}, f32({4}));
  g.add_op(op("assign"), {}, {{w, 0}, {updated, 0}}, {});
  const int after = binary(g, "mul", {w, 0}, {w, 0}, f32({4}));  // reads the new w
  g.outputs() = {{after, 0}};
  EXPECT_EQ(update_in_place(g), 1);
  g.compact();
  EXPECT_EQ(g.op_count(), 2) << g.to_text();
  EXPECT_THAT(g.to_text(), HasSubstr("output 0 into %1 \"w\""));
  const Tensor result = run(g, {ones({4})})[0];
  EXPECT_EQ(result.to_vector<float>(), (std::vector<float>{0, 1, 4, 9}));
  EXPECT_EQ(g.node(1).value.to_vector<float>(), (std::vector<float>{0, 1, 2, 3})) << "the variable itself changed";
}

TEST(InPlaceUpdates, KeepsTheCopyWhenTheOldValueIsReadInBetweenOrTheOpIsNotElementwise) {
  Graph g;
  const int x = g.add_argument(0, f32({2, 2}));
  const int w = g.add_capture(ones({2, 2}), "w");
  const int v = g.add_capture(ones({2, 2}), "v");
  const int next_w = binary(g, "add", {w, 0}, {x, 0}, f32({2, 2}));
  const int old_read = binary(g, "mul", {w, 0}, {x, 0}, f32({2, 2}));  // reads w between the add and its assign
  g.add_op(op("assign"), {}, {{w, 0}, {next_w, 0}}, {});
  const int product =
      g.add_op(op("matmul"), Attrs{{"transpose_a", false}, {"transpose_b", false}}, {{v, 0}, {x, 0}}, {f32({2, 2})});
  g.add_op(op("assign"), {}, {{v, 0}, {product, 0}}, {});  // matmul reads v: no in-place
  g.outputs() = {{old_read, 0}};
  EXPECT_EQ(update_in_place(g), 0);
}

TEST(InPlaceUpdates, OneFusedNodeWritesSeveralVariables) {
  // An optimizer step for w and its slot m as one fused node with two outputs.
  Graph g;
  const int grad = g.add_argument(0, f32({4}));
  const int w = g.add_capture(ones({4}), "w");
  const int m = g.add_capture(zeros({4}), "m");
  const int next_m = binary(g, "add", {m, 0}, {grad, 0}, f32({4}));
  const int next_w = binary(g, "sub", {w, 0}, {next_m, 0}, f32({4}));
  g.add_op(op("assign"), {}, {{m, 0}, {next_m, 0}}, {});
  g.add_op(op("assign"), {}, {{w, 0}, {next_w, 0}}, {});
  EXPECT_EQ(fuse_elementwise(g), 1);
  EXPECT_EQ(update_in_place(g), 2) << g.to_text();
  g.compact();
  EXPECT_EQ(g.op_count(), 1) << g.to_text();
  run(g, {Tensor::from_vector<float>({1, 2, 3, 4}, {4})});
  EXPECT_EQ(g.node(m).value.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(g.node(w).value.to_vector<float>(), (std::vector<float>{0, -1, -2, -3}));
}

// ---- update forwarding ----

TEST(UpdateForwarding, LaterReadsReadTheAssignedValueAndUpdatesMoveToTheEnd) {
  Graph g;
  const int x = g.add_argument(0, f32({3}));
  const int w = g.add_capture(Tensor::from_vector<float>({1, 2, 3}, {3}), "w");
  const int next = binary(g, "mul", {w, 0}, {x, 0}, f32({3}));
  g.add_op(op("assign"), {}, {{w, 0}, {next, 0}}, {});
  const int after = binary(g, "add", {w, 0}, {x, 0}, f32({3}));  // reads the new w
  g.outputs() = {{after, 0}};
  Graph original = g;
  const std::vector<Tensor> args = {Tensor::from_vector<float>({2, 2, 2}, {3})};
  const Tensor expected = run(original, args)[0];
  original.node(w).value.copy_from(Tensor::from_vector<float>({1, 2, 3}, {3}));

  EXPECT_EQ(forward_updates(g), 1);
  EXPECT_EQ(g.nodes().back().op->name, "assign") << g.to_text();
  const Node& add = g.node(g.outputs()[0].node);
  EXPECT_EQ(g.node(add.inputs[0].node).op->name, "mul") << "the read of w became a read of the assigned value";
  EXPECT_TRUE(bit_identical(run(g, args)[0], expected));
  EXPECT_EQ(g.node(w).value.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST(UpdateForwarding, LeavesAGraphAloneWhenAViewOfAnUpdatedVariableIsReadAfterTheUpdate) {
  Graph g;
  const int w = g.add_capture(ones({2, 2}), "w");
  const int view = g.add_op(op("reshape"), Attrs{{"shape", Shape{4}}}, {{w, 0}}, {f32({4})});
  const int doubled = binary(g, "add", {w, 0}, {w, 0}, f32({2, 2}));
  g.add_op(op("assign"), {}, {{w, 0}, {doubled, 0}}, {});
  const int after = g.add_op(op("exp"), {}, {{view, 0}}, {f32({4})});  // sees the new w through the view
  g.outputs() = {{after, 0}};
  EXPECT_EQ(forward_updates(g), 0);
  EXPECT_EQ(g.nodes().back().op->name, "exp");
}

// adam_update(w, m, v, g, alpha, decay) for one tensor of shape {2}, g an argument: it writes w, m and v.
int add_adam_update(Graph& g, int w, int m, int v, int gradient) {
  const int alpha = g.add_constant(Tensor::scalar<double>(0.1));
  const int decay = g.add_constant(Tensor::scalar<double>(0.0));
  return g.add_op(
      op("adam_update"),
      Attrs{{"count", int64_t{1}}, {"beta_1", 0.9}, {"beta_2", 0.999}, {"epsilon", 1e-7}, {"weight_decay", false}},
      {{w, 0}, {m, 0}, {v, 0}, {gradient, 0}, {alpha, 0}, {decay, 0}}, {});
}

TEST(UpdateForwarding, LeavesAGraphAloneWhenAnAssignTargetsAVariableAnotherOpWritesInPlace) {
  Graph g;
  const int x = g.add_argument(0, f32({2}));
  const int w = g.add_capture(ones({2}), "w"), m = g.add_capture(ones({2}), "m"), v = g.add_capture(ones({2}), "v");
  const int scaled = binary(g, "mul", {w, 0}, {x, 0}, f32({2}));
  g.add_op(op("assign"), {}, {{w, 0}, {scaled, 0}}, {});
  const int update = add_adam_update(g, w, m, v, x);  // must write the variable w, after the assign
  EXPECT_EQ(forward_updates(g), 0);
  EXPECT_EQ(g.node(update).inputs[0].node, w);
  EXPECT_EQ(g.nodes().back().op->name, "adam_update");
}

TEST(CommonSubexpressions, AReadOfASlotAdamUpdateWritesIsNotMergedAcrossIt) {
  Graph g;
  const int x = g.add_argument(0, f32({2}));
  const int w = g.add_capture(ones({2}), "w"), m = g.add_capture(ones({2}), "m"), v = g.add_capture(ones({2}), "v");
  const int before = binary(g, "mul", {x, 0}, {v, 0}, f32({2}));
  add_adam_update(g, w, m, v, x);
  const int after = binary(g, "mul", {x, 0}, {v, 0}, f32({2}));  // reads the updated v (input 2)
  g.outputs() = {{before, 0}, {after, 0}};
  EXPECT_EQ(eliminate_common_subexpressions(g), 0);
  EXPECT_FALSE(g.node(after).removed);
  // The update changed v: the two reads differ when run.
  const std::vector<Tensor> results = run(g, {Tensor::from_vector<float>({0.5f, -2.0f}, {2})});
  EXPECT_FALSE(bit_identical(results[0], results[1]));
}

// ---- memory planning ----

// A chain long enough that reuse matters: x -> exp -> neg -> add(., x) -> mul(., .) -> sum.
Graph chain_graph() {
  Graph g;
  const int x = g.add_argument(0, f32({256, 256}));
  const int e = g.add_op(op("exp"), {}, {{x, 0}}, {f32({256, 256})});
  const int n = g.add_op(op("neg"), {}, {{e, 0}}, {f32({256, 256})});
  const int a = binary(g, "add", {n, 0}, {x, 0}, f32({256, 256}));
  const int t = g.add_op(op("transpose"), Attrs{{"perm", std::vector<int64_t>{1, 0}}}, {{a, 0}}, {f32({256, 256})});
  const int m = binary(g, "mul", {t, 0}, {a, 0}, f32({256, 256}));
  const int s = g.add_op(op("sum"), Attrs{{"axes", std::vector<int64_t>{}}, {"keepdims", false}}, {{m, 0}}, {f32({})});
  g.outputs() = {{s, 0}};
  return g;
}

TEST(MemoryPlan, ReusesMemoryAndWritesInPlaceWithIdenticalResults) {
  const Graph g = chain_graph();
  const MemoryPlan planned = plan_memory(g);
  const MemoryPlan baseline = plan_memory(g, {.reuse = false});
  EXPECT_LT(planned.arena_bytes, baseline.arena_bytes);
  EXPECT_GT(planned.in_place_count, 0);
  EXPECT_EQ(baseline.arena_bytes, baseline.unplanned_bytes);
  const Tensor x = random_normal({256, 256});
  Executor with_plan(g, planned, Device::cpu());
  Executor without(g, baseline, Device::cpu());
  const std::vector<Tensor> args = {x};
  EXPECT_TRUE(bit_identical(with_plan.run(args)[0], without.run(args)[0]));
}

TEST(MemoryPlan, LiveBuffersNeverOverlap) {
  const Graph g = chain_graph();
  const MemoryPlan plan = plan_memory(g);
  const auto& nodes = g.nodes();
  std::vector<int> last_read(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const ValueRef& input : nodes[i].inputs) last_read[static_cast<size_t>(input.node)] = static_cast<int>(i);
  }
  auto byte_range = [&](int node) {
    const TensorSpec& s = nodes[static_cast<size_t>(node)].outputs[0];
    const uint64_t begin = plan.slot({node, 0}).offset;
    return std::make_pair(begin, begin + static_cast<uint64_t>(s.shape.numel()) * dtype_size(s.dtype));
  };
  auto in_arena = [&](int node) {
    return !nodes[static_cast<size_t>(node)].outputs.empty() && plan.slot({node, 0}).kind == ValueSlot::Kind::kArena;
  };
  // When node i writes, every earlier value still to be read at or after i must
  // keep its bytes, unless node i writes in place over it (same buffer).
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (!in_arena(i)) continue;
    for (int j = 0; j < i; ++j) {
      if (!in_arena(j) || last_read[static_cast<size_t>(j)] < i) continue;
      if (plan.slot({i, 0}).buffer == plan.slot({j, 0}).buffer) continue;
      const auto [a0, a1] = byte_range(i);
      const auto [b0, b1] = byte_range(j);
      EXPECT_TRUE(a1 <= b0 || b1 <= a0) << "%" << i << " overwrites %" << j << ", still read at %"
                                        << last_read[static_cast<size_t>(j)];
    }
  }
}

}  // namespace
}  // namespace nimbus::graph
