#include "nimbus/graph/function.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>

#include "nimbus/autodiff/variable.h"
#include "nimbus/base/error.h"
#include "nimbus/base/logging.h"
#include "nimbus/device/runtime.h"
#include "nimbus/graph/executor.h"
#include "nimbus/graph/passes.h"
#include "nimbus/ops/dispatch.h"

namespace nimbus {
namespace {

using graph::Graph;
using graph::ValueRef;

class Tracer;

// What a symbolic tensor stands for: a value in the graph `tracer` is building.
struct TracedValue final : SymbolicValue {
  TracedValue(const Tracer* t, ValueRef v) : tracer(t), value(v) {}
  const Tracer* tracer;
  ValueRef value;
};

// Records every op call on its thread into a graph and returns symbolic outputs.
class Tracer final : public OpInterceptor {
 public:
  Tracer(Graph& graph, Device device) : graph_(graph), device_(device) {}

  Tensor argument(int index, const TensorSpec& spec) {
    const int node = graph_.add_argument(index, spec);
    return Tensor::symbolic(spec.shape, spec.dtype, device_, std::make_shared<TracedValue>(this, ValueRef{node, 0}));
  }

  // The graph value a tensor stands for; tensors from outside become captures.
  ValueRef value_of(const Tensor& tensor) {
    if (tensor.is_symbolic()) {
      const auto* traced = dynamic_cast<const TracedValue*>(tensor.symbolic_value().get());
      if (traced == nullptr || traced->tracer != this) {
        throw InvalidArgument("a symbolic tensor from another traced function was used in this one",
                              "pass tensors between traced functions as arguments and results");
      }
      return traced->value;
    }
    auto [it, inserted] = captures_.try_emplace(tensor.impl_ptr().get(), -1);
    if (inserted) {
      const std::optional<VariableInfo> variable = variable_info_of(tensor);
      it->second = variable ? graph_.add_capture(tensor, variable->name, variable->trainable)
                            : graph_.add_capture(tensor, "", false);
      captured_.push_back(tensor);  // keeps the impl alive, so its address stays unique
    }
    return {it->second, 0};
  }

  std::vector<Tensor> intercept(const OpSchema& op, std::span<const Tensor> inputs, const Attrs& attrs,
                                Device device) override {
    std::vector<ValueRef> refs;
    std::vector<TensorSpec> specs;
    for (const Tensor& input : inputs) {
      refs.push_back(value_of(input));
      specs.push_back({input.shape(), input.dtype()});
    }
    std::vector<TensorSpec> outputs = infer_outputs(op, specs, attrs);
    const int node = graph_.add_op(op, attrs, std::move(refs), outputs);
    std::vector<Tensor> result;
    for (size_t k = 0; k < outputs.size(); ++k) {
      result.push_back(Tensor::symbolic(outputs[k].shape, outputs[k].dtype, device,
                                        std::make_shared<TracedValue>(this, ValueRef{node, static_cast<int>(k)})));
    }
    return result;
  }

 private:
  Graph& graph_;
  Device device_;
  std::unordered_map<const TensorImpl*, int> captures_;
  std::vector<Tensor> captured_;
};

// Installs a tracer for the current thread and restores the previous interceptor.
class TracingScope {
 public:
  explicit TracingScope(Tracer* tracer) : previous_(set_op_interceptor(tracer)) {}
  ~TracingScope() { set_op_interceptor(previous_); }
  TracingScope(const TracingScope&) = delete;
  TracingScope& operator=(const TracingScope&) = delete;

 private:
  OpInterceptor* previous_;
};

struct Signature {
  std::vector<TensorSpec> inputs;
  Device device;

  bool operator<(const Signature& other) const {
    auto key = [](const Signature& s) {
      std::vector<std::tuple<int, std::vector<int64_t>>> k;
      for (const TensorSpec& spec : s.inputs) k.emplace_back(static_cast<int>(spec.dtype), spec.shape.to_vector());
      return std::make_tuple(s.device.type.id(), s.device.index, k);
    };
    return key(*this) < key(other);
  }
};

// "(f32[?, 784], i64[?])": -1 (dynamic) dimensions print as "?".
std::string signature_text(const std::vector<InputSignature>& inputs) {
  std::vector<std::string> parts;
  for (const InputSignature& input : inputs) {
    std::vector<std::string> dims;
    for (int64_t d : input.shape) dims.push_back(d < 0 ? "?" : std::to_string(d));
    parts.push_back(fmt::format("{}[{}]", dtype_name(input.dtype), fmt::join(dims, ", ")));
  }
  return fmt::format("({})", fmt::join(parts, ", "));
}

std::vector<InputSignature> as_signature(const std::vector<TensorSpec>& specs) {
  std::vector<InputSignature> result;
  result.reserve(specs.size());
  for (const TensorSpec& spec : specs) result.push_back({spec.shape.to_vector(), spec.dtype});
  return result;
}

// What differs between two signatures, for the retracing warning.
std::string describe_change(const std::vector<TensorSpec>& before, const std::vector<TensorSpec>& after) {
  if (before.size() != after.size()) return fmt::format("{} inputs -> {} inputs", before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].dtype != after[i].dtype) {
      return fmt::format("dtype of input {}: {} -> {}", i, dtype_name(before[i].dtype), dtype_name(after[i].dtype));
    }
    if (before[i].shape.rank() != after[i].shape.rank()) {
      return fmt::format("rank of input {}: {} -> {}", i, before[i].shape.rank(), after[i].shape.rank());
    }
    for (int d = 0; d < before[i].shape.rank(); ++d) {
      const int64_t was = before[i].shape.dims()[d], now = after[i].shape.dims()[d];
      if (was == now) continue;
      std::string message = fmt::format("dim {} of input {}: {} -> {}", d, i, was, now);
      if (d == 0 && now < was) {
        message +=
            "; the last batch is smaller: use drop_remainder or mark the dimension dynamic (-1 in "
            "FunctionOptions::input_signature)";
      }
      return message;
    }
  }
  return "the device";
}

void dump_graph(const Graph& graph, const std::string& name, const std::string& stage) {
  const char* dir = std::getenv("NIMBUS_DUMP_GRAPH");
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::create_directories(dir);
  const std::string base = (std::filesystem::path(dir) / (name + "." + stage)).string();
  std::ofstream(base + ".txt") << graph.to_text(name);
  std::ofstream(base + ".dot") << graph.to_dot(name);
}

}  // namespace

struct Function::State {
  Body body;
  FunctionOptions options;
  std::mutex mutex;
  struct Entry {
    TracedGraph traced;
    std::unique_ptr<graph::Executor> executor;
  };
  std::map<Signature, Entry> cache;
  std::vector<std::vector<TensorSpec>> traced_signatures;
  int trace_count = 0;
  bool warned = false;

  Entry& entry_for(const Signature& signature) {
    auto it = cache.find(signature);
    if (it != cache.end()) return it->second;
    return trace(signature);
  }

  Entry& trace(const Signature& signature) {
    Entry entry;
    Graph& graph = entry.traced.traced;
    {
      Tracer tracer(graph, signature.device);
      std::vector<Tensor> arguments;
      for (size_t i = 0; i < signature.inputs.size(); ++i) {
        arguments.push_back(tracer.argument(static_cast<int>(i), signature.inputs[i]));
      }
      std::vector<Tensor> results;
      {
        TracingScope scope(&tracer);
        results = body(arguments);
      }
      for (const Tensor& result : results) {
        if (!result.defined()) {
          throw InvalidArgument(fmt::format("traced function '{}' returned an undefined tensor", options.name));
        }
        graph.outputs().push_back(tracer.value_of(result));
      }
    }
    ++trace_count;
    warn_if_retracing(signature.inputs);
    const std::string dump_name = fmt::format("{}.{}", options.name, trace_count);
    dump_graph(graph, dump_name, "traced");
    entry.traced.optimized = graph;
    const bool jit = options.jit.value_or(runtime_options().jit);
    graph::optimize(entry.traced.optimized, {.device = signature.device,
                                             .fuse_elementwise = jit,
                                             .fuse_epilogues = jit,
                                             .fuse_pool_relu_gradients = jit,
                                             .fuse_relu_bias_gradients = jit,
                                             .pair_matmuls = jit});
    dump_graph(entry.traced.optimized, dump_name, "optimized");
    entry.traced.plan = graph::plan_memory(entry.traced.optimized);
    entry.executor = std::make_unique<graph::Executor>(entry.traced.optimized, entry.traced.plan, signature.device);
    return cache.emplace(signature, std::move(entry)).first->second;
  }

  void warn_if_retracing(const std::vector<TensorSpec>& specs) {
    traced_signatures.push_back(specs);
    if (warned || trace_count <= options.max_traces_before_warning) return;
    warned = true;
    const auto& before = traced_signatures[traced_signatures.size() - 2];
    log_warning(
        fmt::format("function '{}' has traced {} signatures; the latest changed {}. Each new signature "
                    "traces and optimizes the function again.",
                    options.name, trace_count, describe_change(before, specs)));
  }

  // Checks a call against input_signature; returns true when it must run eagerly
  // (dynamic dimensions differ from the traced ones).
  bool check_signature(const std::vector<TensorSpec>& given) {
    if (!options.input_signature) return false;
    const std::vector<InputSignature>& expected = *options.input_signature;
    bool matches = given.size() == expected.size();
    for (size_t i = 0; matches && i < given.size(); ++i) {
      matches = given[i].dtype == expected[i].dtype && given[i].shape.rank() == std::ssize(expected[i].shape);
      for (int d = 0; matches && d < given[i].shape.rank(); ++d) {
        const int64_t want = expected[i].shape[static_cast<size_t>(d)];
        matches = want < 0 || want == given[i].shape.dims()[d];
      }
    }
    if (!matches) {
      throw InvalidArgument(fmt::format("function '{}' expects inputs {}, got {}", options.name,
                                        signature_text(expected), signature_text(as_signature(given))));
    }
    if (traced_signatures.empty()) return false;
    const auto& traced = traced_signatures.front();
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i].shape != traced[i].shape) return true;
    }
    return false;
  }
};

Function::Function(Body body, FunctionOptions options) : state_(std::make_shared<State>()) {
  state_->body = std::move(body);
  state_->options = std::move(options);
}

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& inputs) const {
  State& s = *state_;
  // Inside another trace, inline: the body's ops join the enclosing graph.
  if (current_op_interceptor() != nullptr) return s.body(inputs);
  Signature signature;
  for (const Tensor& input : inputs) {
    if (!input.defined()) throw InvalidArgument(fmt::format("function '{}': an input is undefined", s.options.name));
    signature.inputs.push_back({input.shape(), input.dtype()});
  }
  signature.device = inputs.empty() ? Device::cpu() : inputs[0].device();
  std::lock_guard lock(s.mutex);
  // A signature traced before (traced_for too) runs its graph even where its dynamic dimensions differ.
  const bool eager = !s.options.graph.value_or(runtime_options().graph) ||
                     (s.check_signature(signature.inputs) && s.cache.count(signature) == 0);
  if (eager) return s.body(inputs);
  return s.entry_for(signature).executor->run(inputs);
}

int Function::trace_count() const { return state_->trace_count; }

const TracedGraph& Function::traced_for(const std::vector<Tensor>& inputs) const {
  State& s = *state_;
  Signature signature;
  for (const Tensor& input : inputs) signature.inputs.push_back({input.shape(), input.dtype()});
  signature.device = inputs.empty() ? Device::cpu() : inputs[0].device();
  std::lock_guard lock(s.mutex);
  return s.entry_for(signature).traced;
}

void Function::release_memory() const {
  std::lock_guard lock(state_->mutex);
  for (auto& [signature, entry] : state_->cache) entry.executor->release_arena();
}

}  // namespace nimbus
