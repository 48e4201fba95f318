#include "nimbus/graph/memory_plan.h"

#include <algorithm>
#include <map>

#include "nimbus/base/error.h"
#include "nimbus/device/allocator.h"

namespace nimbus::graph {
namespace {

uint64_t aligned_bytes(const TensorSpec& spec) {
  const uint64_t bytes = static_cast<uint64_t>(spec.shape.numel()) * dtype_size(spec.dtype);
  return (bytes + Allocator::kAlignment - 1) / Allocator::kAlignment * Allocator::kAlignment;
}

// One buffer: the values that share it and the span of nodes during which it must stay intact.
struct Buffer {
  uint64_t bytes = 0;
  int first = 0;  // node that writes it first
  int last = 0;   // last node that reads it
  bool fresh = false;
  uint64_t offset = 0;
};

bool can_write_in_place(const Node& node, const Graph& graph, ValueRef input, const Node& producer) {
  if (node.kind != NodeKind::kOp || node.op->kind != OpKind::kElementwise || node.op->has_side_effects) return false;
  if (node.outputs.size() != 1 || producer.kind != NodeKind::kOp) return false;
  // Same shape and dtype: element i of the output overwrites element i of the input, after reading it.
  const TensorSpec& in = graph.spec(input);
  return in.shape == node.outputs[0].shape && in.dtype == node.outputs[0].dtype;
}

}  // namespace

MemoryPlan plan_memory(const Graph& graph, const MemoryPlanOptions& options) {
  const auto& nodes = graph.nodes();
  MemoryPlan plan;
  plan.slots.resize(nodes.size());

  // Last reader of every value (graph outputs live past the end).
  std::map<std::pair<int, int>, int> last_use;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const ValueRef& input : nodes[i].inputs) {
      int& last = last_use[{input.node, input.output}];
      last = std::max(last, static_cast<int>(i));
    }
  }
  const int end = static_cast<int>(nodes.size());
  for (const ValueRef& output : graph.outputs()) last_use[{output.node, output.output}] = end;
  auto last_of = [&](ValueRef v) {
    auto it = last_use.find({v.node, v.output});
    return it == last_use.end() ? -1 : it->second;
  };

  std::vector<Buffer> buffers;
  std::map<std::pair<int, int>, int> buffer_of;  // value -> index into buffers
  auto join = [&](ValueRef value, int buffer) {
    buffer_of[{value.node, value.output}] = buffer;
    buffers[static_cast<size_t>(buffer)].last = std::max(buffers[static_cast<size_t>(buffer)].last, last_of(value));
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    auto& slots = plan.slots[i];
    slots.resize(node.outputs.size());
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ValueRef value{static_cast<int>(i), static_cast<int>(k)};
      slots[k].buffer = value;
      if (node.kind != NodeKind::kOp) {
        slots[k].kind = ValueSlot::Kind::kExternal;
        continue;
      }
      if (k < node.writes_into.size() && node.writes_into[k] >= 0) {
        slots[k].kind = ValueSlot::Kind::kInto;
        slots[k].buffer = {node.writes_into[k], 0};
        continue;
      }
      // Aliasing ops view their input's buffer.
      if (node.op->output_aliases_input) {
        const ValueRef source = node.inputs[0];
        const ValueSlot& source_slot = plan.slot(source);
        if (source_slot.kind == ValueSlot::Kind::kExternal || source_slot.kind == ValueSlot::Kind::kInto) {
          slots[k].kind = ValueSlot::Kind::kExternal;
          slots[k].buffer = source_slot.buffer;
        } else {
          slots[k].buffer = source_slot.buffer;
          join(value, buffer_of.at({source_slot.buffer.node, source_slot.buffer.output}));
        }
        continue;
      }
      // In place: reuse the buffer of an input whose last reader is this node.
      bool placed = false;
      if (options.in_place && options.reuse && k == 0) {
        for (const ValueRef& input : node.inputs) {
          const ValueSlot& input_slot = plan.slot(input);
          if (input_slot.kind != ValueSlot::Kind::kArena) continue;
          const int buffer = buffer_of.at({input_slot.buffer.node, input_slot.buffer.output});
          if (buffers[static_cast<size_t>(buffer)].last != static_cast<int>(i)) continue;
          if (!can_write_in_place(node, graph, input, graph.node(input.node))) continue;
          const int readers = static_cast<int>(std::count(node.inputs.begin(), node.inputs.end(), input));
          if (readers != 1) continue;
          slots[k].buffer = input_slot.buffer;
          join(value, buffer);
          ++plan.in_place_count;
          placed = true;
          break;
        }
      }
      if (placed) continue;
      buffers.push_back(
          {.bytes = aligned_bytes(node.outputs[k]), .first = static_cast<int>(i), .last = static_cast<int>(i)});
      join(value, static_cast<int>(buffers.size()) - 1);
    }
  }

  // Buffers that hold a graph output are allocated fresh on every run.
  for (const ValueRef& output : graph.outputs()) {
    const ValueSlot& slot = plan.slot(output);
    if (slot.kind == ValueSlot::Kind::kExternal || slot.kind == ValueSlot::Kind::kInto) continue;
    buffers[static_cast<size_t>(buffer_of.at({slot.buffer.node, slot.buffer.output}))].fresh = true;
  }

  // Greedy by size (largest first): each buffer goes to the lowest offset that
  // no buffer with an overlapping lifetime occupies.
  std::vector<int> order;
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b].fresh) {
      order.push_back(static_cast<int>(b));
      plan.unplanned_bytes += buffers[b].bytes;
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return buffers[static_cast<size_t>(a)].bytes > buffers[static_cast<size_t>(b)].bytes;
  });
  std::vector<int> placed;
  for (int b : order) {
    Buffer& buffer = buffers[static_cast<size_t>(b)];
    if (!options.reuse) {
      buffer.offset = plan.arena_bytes;
      plan.arena_bytes += buffer.bytes;
      continue;
    }
    std::vector<std::pair<uint64_t, uint64_t>> taken;  // [begin, end) of overlapping-in-time buffers
    for (int p : placed) {
      const Buffer& other = buffers[static_cast<size_t>(p)];
      if (other.first <= buffer.last && buffer.first <= other.last) {
        taken.emplace_back(other.offset, other.offset + other.bytes);
      }
    }
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (const auto& [begin, finish] : taken) {
      if (offset + buffer.bytes <= begin) break;
      offset = std::max(offset, finish);
    }
    buffer.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + buffer.bytes);
    placed.push_back(b);
  }

  for (auto& node_slots : plan.slots) {
    for (ValueSlot& slot : node_slots) {
      if (slot.kind == ValueSlot::Kind::kExternal || slot.kind == ValueSlot::Kind::kInto) continue;
      const Buffer& buffer = buffers[static_cast<size_t>(buffer_of.at({slot.buffer.node, slot.buffer.output}))];
      slot.kind = buffer.fresh ? ValueSlot::Kind::kFresh : ValueSlot::Kind::kArena;
      slot.offset = buffer.offset;
    }
  }
  return plan;
}

}  // namespace nimbus::graph
