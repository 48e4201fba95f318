// Memory planning: every intermediate tensor of a graph gets a slot in one
// arena, allocated once per graph. Liveness analysis lets tensors whose
// lifetimes do not overlap share memory; an elementwise op whose input dies
// at that op writes its output over the input (in place); aliasing ops
// (reshape) share their input's slot. Graph outputs get fresh memory on each
// run so the caller keeps them.
//
//   MemoryPlan plan = plan_memory(graph);
//   plan.arena_bytes;        // peak bytes of intermediates
//   plan.unplanned_bytes;    // what one buffer per intermediate would take
#pragma once

#include <cstdint>
#include <vector>

#include "nimbus/graph/graph.h"

namespace nimbus::graph {

// Where one value's elements live when the graph runs.
struct ValueSlot {
  enum class Kind {
    kArena,     // at `offset` in the arena
    kFresh,     // a new allocation on each run (graph outputs and what they alias)
    kExternal,  // an argument, capture or constant: the tensor itself (or a view of one)
    kInto,      // an output written into a capture's memory (an in-place update): `buffer` is the capture
  };
  Kind kind = Kind::kArena;
  uint64_t offset = 0;
  // The value whose buffer this one shares (itself unless it aliases or is in place).
  ValueRef buffer;
};

struct MemoryPlan {
  // slots[node][output]
  std::vector<std::vector<ValueSlot>> slots;
  uint64_t arena_bytes = 0;
  // The sum of all arena-planned buffers: the memory without reuse.
  uint64_t unplanned_bytes = 0;
  int in_place_count = 0;

  const ValueSlot& slot(ValueRef value) const {
    return slots[static_cast<size_t>(value.node)][static_cast<size_t>(value.output)];
  }
};

struct MemoryPlanOptions {
  bool reuse = true;     // false: every intermediate gets its own slot (the baseline)
  bool in_place = true;  // elementwise ops may overwrite an input that dies there
};

MemoryPlan plan_memory(const Graph& graph, const MemoryPlanOptions& options = {});

}  // namespace nimbus::graph
