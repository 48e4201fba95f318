// The graph IR: what tracing a function records and what the passes rewrite.
//
// A Graph is a list of nodes in a valid execution order (program order when
// traced). Each node is an op call (an OpSchema with attributes and inputs),
// a function argument, a captured tensor (a variable or other tensor from
// outside the function, read by reference when the graph runs, so updates are
// seen) or a constant (a value the graph owns, e.g. from constant folding).
// Values are (node, output) pairs.
//
//   graph.to_text();  // one node a line, like HLO or ggml's graph dump:
//   //   %0 = argument 0 : f32[32, 784]
//   //   %1 = capture "dense/kernel" : f32[784, 256]
//   //   %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[32, 256]
//   //   assign(%1, %9)
//   //   return %2
//   graph.to_dot();   // Graphviz, for pictures
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/ops/op_schema.h"

namespace nimbus::graph {

struct ValueRef {
  int node = -1;
  int output = 0;
  bool operator==(const ValueRef&) const = default;
};

enum class NodeKind { kArgument, kCapture, kConstant, kOp };

struct Node {
  NodeKind kind = NodeKind::kOp;
  const OpSchema* op = nullptr;  // kOp only
  Attrs attrs;
  std::vector<ValueRef> inputs;
  std::vector<TensorSpec> outputs;
  int argument = -1;       // kArgument: the function's input index
  Tensor value;            // kCapture: the outside tensor (by reference); kConstant: the owned value
  std::string name;        // kCapture: the variable's name when there is one
  bool trainable = false;  // kCapture: a trainable variable (a parameter)
  // Per output: the capture node whose memory that output is written into (an
  // update folded into the op that computes it), or -1. Empty: none.
  std::vector<int> writes_into;
  bool removed = false;  // passes mark nodes removed; compact() drops them

  // Whether running the node changes state outside the graph (assign, or an output written into a capture).
  bool has_side_effects() const;
};

class Graph {
 public:
  int add_argument(int index, const TensorSpec& spec);
  // `trainable`: the capture is a trainable variable (a parameter).
  int add_capture(const Tensor& tensor, std::string name, bool trainable = false);
  int add_constant(const Tensor& value);
  int add_op(const OpSchema& op, const Attrs& attrs, std::vector<ValueRef> inputs, std::vector<TensorSpec> outputs);
  // Appends a node as given (passes that rebuild a graph copy nodes with it).
  int add_node(Node node);

  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  Node& node(int id) { return nodes_[static_cast<size_t>(id)]; }
  const Node& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  const TensorSpec& spec(ValueRef value) const { return node(value.node).outputs[static_cast<size_t>(value.output)]; }

  std::vector<ValueRef>& outputs() { return outputs_; }
  const std::vector<ValueRef>& outputs() const { return outputs_; }

  // Redirects every use of `from` (inputs and graph outputs) to `to`.
  void replace_uses(ValueRef from, ValueRef to);
  // Drops removed nodes and renumbers the rest, keeping their order.
  void compact();
  // Op nodes still in the graph.
  int op_count() const;

  std::string to_text(const std::string& name = "graph") const;
  std::string to_dot(const std::string& name = "graph") const;

 private:
  std::vector<Node> nodes_;
  std::vector<ValueRef> outputs_;
};

// The capture node whose memory a value is (the capture itself, or a view of
// it such as a reshape), or -1.
int capture_of(const Graph& graph, ValueRef value);

// How many readers each value (node, output) has: inputs of the nodes not removed, and graph outputs.
std::map<std::pair<int, int>, int> reader_counts(const Graph& graph);

// "f32[32, 784]"
std::string spec_to_string(const TensorSpec& spec);

}  // namespace nimbus::graph
