#include "nimbus/graph/executor.h"

#include <map>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/device/allocator.h"
#include "nimbus/device/backend.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/op_profile.h"

namespace nimbus::graph {

Executor::Executor(Graph graph, MemoryPlan plan, Device device)
    : graph_(std::move(graph)), plan_(std::move(plan)), device_(device) {
  kernels_.assign(graph_.nodes().size(), nullptr);
  // An op the device has no kernel for fails here, before the first run, not in its middle.
  for (const Node& node : graph_.nodes()) {
    if (node.kind != NodeKind::kOp) continue;
    std::vector<TensorSpec> inputs;
    inputs.reserve(node.inputs.size());
    for (const ValueRef& input : node.inputs) inputs.push_back(graph_.spec(input));
    check_supported(*node.op, device_, inputs, node.outputs);
  }
}

void Executor::allocate_arena() {
  AllocationTagScope tag(MemoryTag::kActivations);
  arena_ = std::make_shared<Storage>(device_, plan_.arena_bytes);
  const auto& nodes = graph_.nodes();
  arena_views_.assign(nodes.size(), {});
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t k = 0; k < nodes[i].outputs.size(); ++k) {
      const ValueSlot& slot = plan_.slots[i][k];
      const TensorSpec& spec = nodes[i].outputs[k];
      arena_views_[i].push_back(
          slot.kind == ValueSlot::Kind::kArena ? Tensor::view(arena_, slot.offset, spec.shape, spec.dtype) : Tensor());
    }
  }
}

void Executor::release_arena() {
  arena_views_.clear();
  arena_.reset();
}

std::vector<Tensor> Executor::run(std::span<const Tensor> arguments) {
  if (arena_ == nullptr) allocate_arena();
  const auto& nodes = graph_.nodes();
  std::vector<std::vector<Tensor>> values(nodes.size());
  // Fresh buffers of this run, by the value that owns them.
  std::map<std::pair<int, int>, std::shared_ptr<Storage>> fresh;
  Stream& stream = default_stream_for(device_);

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    switch (node.kind) {
      case NodeKind::kArgument: values[i] = {arguments[static_cast<size_t>(node.argument)]}; continue;
      case NodeKind::kCapture:
      case NodeKind::kConstant: values[i] = {node.value}; continue;
      case NodeKind::kOp: break;
    }
    std::vector<Tensor> inputs;
    inputs.reserve(node.inputs.size());
    for (const ValueRef& input : node.inputs) {
      inputs.push_back(values[static_cast<size_t>(input.node)][static_cast<size_t>(input.output)]);
    }
    std::vector<Tensor>& outputs = values[i];
    outputs.resize(node.outputs.size());
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ValueSlot& slot = plan_.slots[i][k];
      const TensorSpec& spec = node.outputs[k];
      switch (slot.kind) {
        case ValueSlot::Kind::kArena: outputs[k] = arena_views_[i][k]; break;
        case ValueSlot::Kind::kInto: outputs[k] = values[static_cast<size_t>(slot.buffer.node)][0]; break;
        case ValueSlot::Kind::kExternal: {
          // An aliasing op over an argument or capture: view the same memory under the new shape.
          const TensorImpl& source = *inputs[0].impl_ptr();
          outputs[k] = Tensor::view(source.storage, source.offset, spec.shape, spec.dtype);
          break;
        }
        case ValueSlot::Kind::kFresh: {
          auto& storage = fresh[{slot.buffer.node, slot.buffer.output}];
          if (storage == nullptr) {
            const TensorSpec& owner = graph_.spec(slot.buffer);
            storage =
                std::make_shared<Storage>(device_, static_cast<size_t>(owner.shape.numel()) * dtype_size(owner.dtype));
          }
          outputs[k] = Tensor::view(storage, 0, spec.shape, spec.dtype);
          break;
        }
      }
    }
    // Random ops claim fresh numbers on every run, as they would eagerly.
    const Attrs* attrs = &node.attrs;
    Attrs redrawn;
    if (node.op->kind == OpKind::kRandom) {
      redrawn = node.attrs;
      Generator& generator = find_generator(static_cast<uint64_t>(node.attrs.get_int("generator")));
      redrawn.set("seed", static_cast<int64_t>(generator.seed()))
          .set("offset", static_cast<int64_t>(generator.reserve(static_cast<uint64_t>(node.outputs[0].shape.numel()))));
      attrs = &redrawn;
    }
    KernelContext context{*node.op, *attrs, inputs, outputs, stream};
    if (kernels_[i] == nullptr) kernels_[i] = &select_kernel(context);
    run_kernel_profiled(*node.op, *kernels_[i], context);
  }

  std::vector<Tensor> results;
  for (const ValueRef& output : graph_.outputs()) {
    results.push_back(values[static_cast<size_t>(output.node)][static_cast<size_t>(output.output)]);
  }
  return results;
}

}  // namespace nimbus::graph
