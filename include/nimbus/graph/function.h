// nimbus::function: trace a C++ function into an optimized dataflow graph
// (Nimbus's tf.function). The first call with a new input signature (shapes
// and dtypes) runs the body once with symbolic tensors, recording every op
// into a graph (gradient tapes inside record the backward pass through the
// same gradient rules as eager mode; variable updates become assign nodes);
// the graph is optimized and its memory planned; later calls with the same
// signature run the graph without tracing.
//
//   Variable w(...), b(...);
//   auto train_step = function([&](const std::vector<Tensor>& in) {
//     GradientTape tape;
//     Tensor loss = mean(sparse_softmax_cross_entropy(matmul(in[0], w.value()) + b.value(), in[1]));
//     auto grads = tape.gradient(loss, std::vector<Variable>{w, b});
//     w.assign_sub(grads[0] * 0.1);
//     b.assign_sub(grads[1] * 0.1);
//     return std::vector<Tensor>{loss};
//   }, {.name = "train_step"});
//   Tensor loss = train_step({x, labels})[0];
//
// Tensors from outside the body (variables, constants) are captured by
// reference: the graph reads their current values on every run.
// runtime.graph = false runs every call eagerly; runtime.jit = false turns
// off elementwise fusion. NIMBUS_DUMP_GRAPH=DIR writes each traced graph
// before and after optimization (text and DOT).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/graph/graph.h"
#include "nimbus/graph/memory_plan.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

// An expected input: its dtype and shape, where -1 marks a dynamic dimension.
struct InputSignature {
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
};

struct FunctionOptions {
  std::string name = "function";
  // Overrides runtime.graph / runtime.jit for this function.
  std::optional<bool> graph;
  std::optional<bool> jit;
  // When given, calls must match it (a wrong dtype or rank is an error naming
  // both signatures). A dimension of -1 is dynamic: calls may vary it without
  // retracing; calls whose dynamic dimensions differ from the first traced ones
  // run eagerly (a ragged last batch), since Nimbus graphs have static shapes,
  // unless their signature was traced too (traced_for: the memory accounting
  // traces several batch sizes before fit picks one).
  std::optional<std::vector<InputSignature>> input_signature;
  // Warn once when the function has traced more signatures than this.
  int max_traces_before_warning = 5;
};

// What tracing produced for one signature.
struct TracedGraph {
  graph::Graph traced;     // as recorded
  graph::Graph optimized;  // after the passes
  graph::MemoryPlan plan;
};

class Function {
 public:
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

  explicit Function(Body body, FunctionOptions options = {});

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

  // How many times the body has been traced (once per new signature).
  int trace_count() const;
  // The graph for these inputs' signature, tracing it first if needed.
  // Traces without running: no arena is allocated until the first call.
  const TracedGraph& traced_for(const std::vector<Tensor>& inputs) const;
  // Hands the arenas of every traced signature back to the allocator; the
  // next call allocates its signature's arena again.
  void release_memory() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

inline Function function(Function::Body body, FunctionOptions options = {}) {
  return Function(std::move(body), std::move(options));
}

}  // namespace nimbus
