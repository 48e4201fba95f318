// Dispatch: how an op call runs. Every public op function (add, matmul, ...)
// ends in call_op, which
//   1. hands the call to the active interceptor when a function is being
//      traced (graph mode records a node and returns symbolic tensors), or
//   2. infers the outputs' shapes and dtypes, allocates them on the inputs'
//      device and runs the highest-priority kernel that supports the call;
//   3. then tells the active observers (gradient tapes) what ran.
//
//   std::vector<Tensor> outs = call_op(OpRegistry::global().get("add"), {a, b});
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "nimbus/ops/op_schema.h"

namespace nimbus {

std::vector<Tensor> call_op(const OpSchema& op, std::span<const Tensor> inputs, const Attrs& attrs = {},
                            Device device = Device::cpu());
std::vector<Tensor> call_op(const OpSchema& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {},
                            Device device = Device::cpu());
// For single-output ops.
Tensor call_op1(const OpSchema& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {},
                Device device = Device::cpu());

// Shape and dtype inference alone (graph mode and cost analysis use it).
std::vector<TensorSpec> infer_outputs(const OpSchema& op, std::span<const TensorSpec> inputs, const Attrs& attrs);

// Runs the op's best kernel on already-allocated outputs (the graph executor's entry point).
void run_kernel(const OpSchema& op, const Attrs& attrs, std::span<const Tensor> inputs, std::span<Tensor> outputs);
// The kernel run_kernel would pick; throws Unimplemented when none exists.
const KernelDef& select_kernel(const KernelContext& context);

// Whether `device` has kernels for op called on these dtypes (inputs' and outputs' as inferred): the
// registry holds a kernel list per (device type, dtype of the dispatch input, or of output 0 for ops
// without inputs). A kernel in the list may still refuse a call by layout or rank when it runs.
bool supports(const OpSchema& op, DeviceType device, std::span<const TensorSpec> inputs,
              std::span<const TensorSpec> outputs);
// Throws Unimplemented, naming the op, the dtype, the device and what to do, where `supports` is false
// (graph::Executor checks every node so, before a traced step first runs).
void check_supported(const OpSchema& op, Device device, std::span<const TensorSpec> inputs,
                     std::span<const TensorSpec> outputs);

// While alive, dispatch on this thread uses only reference kernels (the test oracle).
class ReferenceKernelsScope {
 public:
  ReferenceKernelsScope();
  ~ReferenceKernelsScope();
  ReferenceKernelsScope(const ReferenceKernelsScope&) = delete;
  ReferenceKernelsScope& operator=(const ReferenceKernelsScope&) = delete;

 private:
  bool previous_;
};

// Graph mode's hook: while installed on a thread, every op call on that thread goes to it.
class OpInterceptor {
 public:
  virtual ~OpInterceptor() = default;
  virtual std::vector<Tensor> intercept(const OpSchema& op, std::span<const Tensor> inputs, const Attrs& attrs,
                                        Device device) = 0;
};
// Installs `interceptor` on this thread; returns the previous one (restore it when done).
OpInterceptor* set_op_interceptor(OpInterceptor* interceptor);
// The interceptor installed on this thread, or null.
OpInterceptor* current_op_interceptor();

// Gradient tapes' hook: observers see every op call on their thread after it ran.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_op(const OpSchema& op, const Attrs& attrs, std::span<const Tensor> inputs,
                     std::span<const Tensor> outputs) = 0;
};
void add_op_observer(OpObserver* observer);
void remove_op_observer(OpObserver* observer);

// While alive, observers on this thread see nothing (gradient rules run under it
// unless a tape asks for higher-order gradients).
class PauseObserversScope {
 public:
  PauseObserversScope();
  ~PauseObserversScope();
  PauseObserversScope(const PauseObserversScope&) = delete;
  PauseObserversScope& operator=(const PauseObserversScope&) = delete;

 private:
  bool previous_;
};

}  // namespace nimbus
