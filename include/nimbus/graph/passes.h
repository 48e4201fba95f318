// Graph passes. Each is a small separate unit that rewrites a graph in place
// and leaves its results unchanged: bit-identical for folding, CSE, DCE and
// algebraic simplification; within a stated tolerance for fusion.
//
//   PassOptions options{.fuse_elementwise = true};
//   optimize(graph, options);   // the pipeline, in order
#pragma once

#include "nimbus/graph/graph.h"

namespace nimbus::graph {

// Evaluates op nodes whose inputs are all constants (never random or
// side-effecting ones) and replaces them with constant nodes, placed on
// `device`, where the graph runs (a source op such as fill has no input to
// say where its value belongs).
int fold_constants(Graph& graph, Device device = Device::cpu());
// Merges op nodes with the same op, attributes and inputs.
int eliminate_common_subexpressions(Graph& graph);
// Removes nodes that neither reach an output nor have side effects.
int eliminate_dead_code(Graph& graph);
// x*1, 1*x, x+0, 0+x, x-0, x/1 -> x; transpose of transpose -> one transpose (or none);
// reshape of reshape -> one reshape.
int simplify_algebra(Graph& graph);

// Update forwarding: after assign(v, x), later reads of v read x, and the
// assigns move to the end, so computations no longer wait on updates (an
// optimizer's per-parameter chains fuse into one kernel). Skipped where a move
// could change what a read sees. Returns the number of reads forwarded.
int forward_updates(Graph& graph);
// Elementwise fusion (the JIT switch): chains of elementwise ops of one shape
// (their inputs may broadcast) become one fused_elementwise node carrying an
// expression program, placed where the chain's last op was. A chain stops
// where an op outside it reads one of its values (so nothing moves past a
// reader) and at an update of a variable it reads (so nothing moves past it).
// Returns the number of fused nodes made.
int fuse_elementwise(Graph& graph);

// Epilogues (the JIT switch too): a matmul or channels-last conv2d whose only
// reader adds a 1-D bias over its last axis, and the activation (relu,
// sigmoid, tanh, gelu) when it is that add's only reader, become one
// fused_matmul or fused_conv2d node (oneDNN's bias and post-op). Returns the
// number of fused nodes made.
int fuse_epilogues(Graph& graph);
// Attention: matmul(q, k, transpose_b) [* scale] [+ mask] -> softmax(-1) -> matmul(·, v) over rank-4
// tensors, where no other op reads an intermediate, becomes one scaled_dot_product_attention node
// (no (T x S) matrix). Returns the number of fused nodes made.
int fuse_attention(Graph& graph);
// Pool-ReLU gradients (the JIT switch, CPU graphs): where(greater(x, 0), max_pool2d_backward(g, x), 0), as a
// CNN's backward pass makes it, becomes one max_pool2d_relu_backward(g, x) node, whose second output (that
// gradient summed per channel) stands in for a sum of it over the other axes (the bias gradient of the
// convolution below). Returns the number of fused nodes made.
int fuse_pool_relu_gradients(Graph& graph);
// ReLU-bias gradients (the JIT switch, CPU graphs): where(greater(x, 0), p, 0) for any other f32 p of x's
// shape, when a sum of it over all but the last axis follows (the bias gradient of the dense layer below the
// relu), becomes one relu_bias_backward(p, x) node whose second output stands in for that sum. Run after
// fuse_pool_relu_gradients, which takes the pooling case. Returns the number of fused nodes made.
int fuse_relu_bias_gradients(Graph& graph);
// Matmul pairs (the JIT switch, CPU graphs): two adjacent 2-D f32 matmuls that share an input, the second not
// reading the first (a dense layer's input and weight gradients), become one matmul_pair node, which the CPU
// runs side by side on a two-thread pool. Returns the number of pairs made.
int pair_matmuls(Graph& graph);
// In-place updates: an assign whose value comes from an op that can write it
// straight into the variable is folded into that op (no copy, no buffer).
// Returns the number of assigns folded.
int update_in_place(Graph& graph);

struct PassOptions {
  Device device = Device::cpu();  // where the graph runs: folded constants go there
  bool fold_constants = true;
  bool forward_updates = true;
  bool eliminate_common_subexpressions = true;
  bool simplify_algebra = true;
  bool fuse_elementwise = true;
  bool fuse_attention = true;
  bool fuse_epilogues = true;
  bool fuse_pool_relu_gradients = true;  // on the CPU only: max_pool2d_relu_backward has CPU kernels alone
  bool fuse_relu_bias_gradients = true;  // on the CPU only: relu_bias_backward's fast kernel is the CPU's
  bool pair_matmuls = true;              // on the CPU only: matmul_pair has a CPU kernel alone
  bool update_in_place = true;
};

// Runs the enabled passes in order (update forwarding, folding,
// simplification, CSE, dead code, attention, matmul epilogues, pool-ReLU and ReLU-bias gradients, matmul pairs,
// elementwise fusion,
// in-place updates) and compacts the graph.
void optimize(Graph& graph, const PassOptions& options);

}  // namespace nimbus::graph
