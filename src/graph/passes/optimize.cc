#include "nimbus/graph/passes.h"

namespace nimbus::graph {

void optimize(Graph& graph, const PassOptions& options) {
  if (options.forward_updates) forward_updates(graph);
  if (options.fold_constants) fold_constants(graph, options.device);
  if (options.simplify_algebra) simplify_algebra(graph);
  if (options.eliminate_common_subexpressions) eliminate_common_subexpressions(graph);
  eliminate_dead_code(graph);
  graph.compact();
  if (options.fuse_attention && fuse_attention(graph) > 0) graph.compact();
  if (options.fuse_epilogues && fuse_epilogues(graph) > 0) graph.compact();
  if (options.fuse_pool_relu_gradients && options.device.is_cpu() && fuse_pool_relu_gradients(graph) > 0) {
    eliminate_dead_code(graph);  // the zeros compared with and selected, sums kept by reshapes now gone
    graph.compact();
  }
  if (options.fuse_relu_bias_gradients && options.device.is_cpu() && fuse_relu_bias_gradients(graph) > 0) {
    eliminate_dead_code(graph);  // the same
    graph.compact();
  }
  if (options.pair_matmuls && options.device.is_cpu() && pair_matmuls(graph) > 0) graph.compact();
  if (options.fuse_elementwise) fuse_elementwise(graph);
  if (options.update_in_place && update_in_place(graph) > 0) graph.compact();
}

}  // namespace nimbus::graph
