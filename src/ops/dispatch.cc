#include "nimbus/ops/dispatch.h"

#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/ops/op_profile.h"
#include "nimbus/ops/precision.h"

namespace nimbus {

namespace {

constexpr size_t kMaxOpInputsOnStack = 8;

struct DispatchState {
  OpInterceptor* interceptor = nullptr;
  std::vector<OpObserver*> observers;
  bool observers_paused = false;
  bool reference_only = false;
};

DispatchState& state() {
  thread_local DispatchState s;
  return s;
}

void check_inputs(const OpSchema& op, std::span<const Tensor> inputs, Device& device) {
  const size_t n = inputs.size();
  const size_t expected = static_cast<size_t>(op.num_inputs);
  if (op.variadic_inputs ? n < expected : n != expected) {
    throw InvalidArgument(
        fmt::format("{}: {} inputs given, {}{} expected", op.name, n, op.variadic_inputs ? "at least " : "", expected));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i].defined()) throw InvalidArgument(fmt::format("{}: input {} is an undefined tensor", op.name, i));
    if (i == 0) {
      device = inputs[0].device();
    } else if (inputs[i].device() != device) {
      throw InvalidArgument(fmt::format("{}: input 0 is on {} but input {} is on {}", op.name, device.to_string(), i,
                                        inputs[i].device().to_string()),
                            "move tensors to one device with .to(device) first");
    }
  }
}

DType dtype_of(const Tensor& tensor) { return tensor.dtype(); }
DType dtype_of(const TensorSpec& spec) { return spec.dtype; }

// The dtype that selects the kernel list: the dispatch input's, or output 0's (ops without inputs).
template <typename Value>
DType dispatch_dtype(const OpSchema& op, std::span<const Value> inputs, std::span<const Value> outputs) {
  if (op.dispatch_input < 0 || inputs.empty()) return dtype_of(outputs[0]);
  return dtype_of(inputs[static_cast<size_t>(op.dispatch_input)]);
}

Unimplemented no_kernel(const OpSchema& op, Device device, DType dtype) {
  std::vector<std::string> available;
  for (DType d : kAllDTypes) {
    if (!op.kernels(device.type, d).empty()) available.emplace_back(dtype_name(d));
  }
  const std::string_view backend_name = device.type.name();
  const std::string has = available.empty() ? fmt::format("the {} backend has no kernel for {}", backend_name, op.name)
                                            : fmt::format("the {} backend has {} kernels for {}", backend_name, op.name,
                                                          fmt::join(available, ", "));
  const std::string remedy = device.is_cpu()
                                 ? "cast the inputs to one of those dtypes"
                                 : fmt::format(
                                       "run on cpu, whose reference kernels cover every op, or register a {} kernel "
                                       "for {} (docs/architecture.md, \"How to add a backend\")",
                                       backend_name, op.name);
  return Unimplemented(fmt::format("{}: no kernel for dtype {} on {}", op.name, dtype_name(dtype), device.to_string()),
                       fmt::format("{}: {}", has, remedy));
}

}  // namespace

bool supports(const OpSchema& op, DeviceType device, std::span<const TensorSpec> inputs,
              std::span<const TensorSpec> outputs) {
  return !op.kernels(device, dispatch_dtype(op, inputs, outputs)).empty();
}

void check_supported(const OpSchema& op, Device device, std::span<const TensorSpec> inputs,
                     std::span<const TensorSpec> outputs) {
  if (!supports(op, device.type, inputs, outputs)) throw no_kernel(op, device, dispatch_dtype(op, inputs, outputs));
}

std::vector<TensorSpec> infer_outputs(const OpSchema& op, std::span<const TensorSpec> inputs, const Attrs& attrs) {
  InferContext context{op, inputs, attrs};
  return op.infer(context);
}

const KernelDef& select_kernel(const KernelContext& context) {
  const OpSchema& op = context.op;
  const Device device = context.stream.device();
  const DType dtype =
      dispatch_dtype(op, std::span<const Tensor>(context.inputs), std::span<const Tensor>(context.outputs));
  const auto& kernels = op.kernels(device.type, dtype);
  const bool reference_only = state().reference_only;
  for (const KernelDef& kernel : kernels) {
    if (reference_only && kernel.name != kReferenceKernel) continue;
    if (kernel.supports == nullptr || kernel.supports(context)) return kernel;
  }
  throw no_kernel(op, device, dtype);
}

void run_kernel(const OpSchema& op, const Attrs& attrs, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const Device device = inputs.empty() ? outputs[0].device() : inputs[0].device();
  KernelContext context{op, attrs, inputs, outputs, default_stream_for(device)};
  run_kernel_profiled(op, select_kernel(context), context);
}

std::vector<Tensor> call_op(const OpSchema& op, std::span<const Tensor> inputs, const Attrs& attrs, Device device) {
  DispatchState& s = state();
  check_inputs(op, inputs, device);
  // Mixed precision: under an AutocastScope the op's precision rule may cast inputs first (before
  // tracing, so graphs record the casts; before the observers, so tapes differentiate through them).
  std::vector<Tensor> cast_inputs;
  if (autocast_dtype() != DType::kF32 && !inputs.empty()) {
    cast_inputs = autocast_inputs(op, inputs, autocast_dtype());
    if (!cast_inputs.empty()) inputs = cast_inputs;
  }
  std::vector<Tensor> outputs;
  if (s.interceptor != nullptr) {
    outputs = s.interceptor->intercept(op, inputs, attrs, device);
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].is_symbolic()) {
        throw InvalidArgument(
            fmt::format("{}: input {} is a symbolic tensor from a traced function, used outside the trace", op.name, i),
            "return the tensor from the traced function to get its value");
      }
    }
    TensorSpec input_specs[kMaxOpInputsOnStack];
    std::vector<TensorSpec> heap_specs;
    std::span<TensorSpec> specs;
    if (inputs.size() <= kMaxOpInputsOnStack) {
      specs = std::span<TensorSpec>(input_specs, inputs.size());
    } else {
      heap_specs.resize(inputs.size());
      specs = heap_specs;
    }
    for (size_t i = 0; i < inputs.size(); ++i) specs[i] = {inputs[i].shape(), inputs[i].dtype()};
    const std::vector<TensorSpec> output_specs = infer_outputs(op, specs, attrs);
    outputs.reserve(output_specs.size());
    if (op.output_aliases_input) {
      const TensorImpl& source = *inputs[0].impl_ptr();
      NIMBUS_ASSERT(output_specs.size() == 1 && output_specs[0].dtype == inputs[0].dtype())
          << op.name << " aliases its input but changes its dtype or output count";
      outputs.push_back(Tensor::view(source.storage, source.offset, output_specs[0].shape, output_specs[0].dtype));
    } else {
      for (const TensorSpec& spec : output_specs) outputs.push_back(Tensor::empty(spec.shape, spec.dtype, device));
    }
    run_kernel(op, attrs, inputs, outputs);
  }
  if (!s.observers.empty() && !s.observers_paused) {
    // Copy: an observer may remove itself while being notified.
    const std::vector<OpObserver*> observers = s.observers;
    for (OpObserver* observer : observers) observer->on_op(op, attrs, inputs, outputs);
  }
  return outputs;
}

std::vector<Tensor> call_op(const OpSchema& op, std::initializer_list<Tensor> inputs, const Attrs& attrs,
                            Device device) {
  return call_op(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, device);
}

Tensor call_op1(const OpSchema& op, std::initializer_list<Tensor> inputs, const Attrs& attrs, Device device) {
  std::vector<Tensor> outputs = call_op(op, inputs, attrs, device);
  NIMBUS_ASSERT(outputs.size() == 1) << op.name << " has " << outputs.size() << " outputs, call_op1 wants one";
  return std::move(outputs[0]);
}

ReferenceKernelsScope::ReferenceKernelsScope() : previous_(state().reference_only) { state().reference_only = true; }
ReferenceKernelsScope::~ReferenceKernelsScope() { state().reference_only = previous_; }

OpInterceptor* set_op_interceptor(OpInterceptor* interceptor) {
  OpInterceptor* previous = state().interceptor;
  state().interceptor = interceptor;
  return previous;
}

OpInterceptor* current_op_interceptor() { return state().interceptor; }

void add_op_observer(OpObserver* observer) { state().observers.push_back(observer); }

void remove_op_observer(OpObserver* observer) {
  auto& observers = state().observers;
  observers.erase(std::remove(observers.begin(), observers.end(), observer), observers.end());
}

PauseObserversScope::PauseObserversScope() : previous_(state().observers_paused) { state().observers_paused = true; }
PauseObserversScope::~PauseObserversScope() { state().observers_paused = previous_; }

}  // namespace nimbus
