// OpSchema: everything Nimbus knows about one op, defined in one place
// (src/ops/<family>.cc): its inputs, how output shapes and dtypes follow from
// the inputs and attributes, its gradient written in terms of other ops (or an
// explicit "not differentiable"), its mixed-precision rule, and its kernels, keyed by (device, dtype)
// and tried in priority order down to the plain reference kernel.
//
// See docs/architecture.md, "How to add an op".
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nimbus/base/dtype.h"
#include "nimbus/base/shape.h"
#include "nimbus/device/device.h"
#include "nimbus/device/stream.h"
#include "nimbus/ops/attrs.h"
#include "nimbus/ops/precision_rule.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

struct OpSchema;

// What graph passes and precision rules need to know about an op.
enum class OpKind {
  kElementwise,  // output element i depends only on input elements i (after broadcasting)
  kReduction,    // reduces axes of one input
  kShape,        // moves or selects data without arithmetic
  kLinalg,       // matmul and friends
  kNN,           // convolution, pooling, normalization, losses
  kSource,       // creates a tensor from attributes alone (fill, range)
  kRandom,       // draws one number per element of output 0 from a generator's stream
                 // (attrs generator, seed, offset): never folded or merged
};

std::string_view op_kind_name(OpKind kind);

struct TensorSpec {
  Shape shape;
  DType dtype = DType::kF32;
};

struct InferContext {
  const OpSchema& op;
  std::span<const TensorSpec> inputs;
  const Attrs& attrs;

  // Throws InvalidArgument with the op's name in front of `message`.
  [[noreturn]] void fail(const std::string& message, const std::string& hint = {}) const;
  // Checks that input `index` has a floating dtype (or one in `allowed`) and names the op otherwise.
  void expect_floating(int index) const;
  void expect_dtype(int index, std::initializer_list<DType> allowed) const;
  void expect_same_dtype(int a, int b) const;
  void expect_rank(int index, int rank) const;
};
using InferFn = std::function<std::vector<TensorSpec>(const InferContext&)>;

struct KernelContext {
  const OpSchema& op;
  const Attrs& attrs;
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;  // allocated with the inferred shapes and dtypes
  Stream& stream;
};
using KernelFn = std::function<void(KernelContext&)>;

struct KernelDef {
  std::string name;  // "reference", "onednn", "vectorized", ...
  DeviceType device = DeviceType::kCPU;
  std::vector<DType> dtypes;  // the dtypes of the op's dispatch input this kernel serves
  int priority = 0;           // tried highest first; reference kernels have priority 0
  KernelFn fn = nullptr;
  // Optional: returns false for calls this kernel does not handle (a layout, a rank).
  std::function<bool(const KernelContext&)> supports = nullptr;
};

inline constexpr int kReferencePriority = 0;
inline constexpr const char* kReferenceKernel = "reference";

struct GradContext {
  const OpSchema& op;
  const Attrs& attrs;
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  // One per output; undefined where no gradient flows into that output.
  std::span<const Tensor> grad_outputs;
  // One per input: whether the caller wants that input's gradient.
  std::span<const bool> needs_input_grad;

  bool needs(int input) const { return needs_input_grad[static_cast<size_t>(input)]; }
  // grad_outputs[i], or zeros shaped like outputs[i] when it is undefined.
  Tensor grad_output(int i) const;
};
// Returns one tensor per input: its gradient, or an undefined tensor for none.
using GradientFn = std::function<std::vector<Tensor>(const GradContext&)>;

// An aggregate, so that definitions read as designated initializers.
struct OpSchema {
  std::string name;
  std::string summary = {};  // one line for the op list in docs/ops.md
  OpKind kind = OpKind::kElementwise;
  // How autocast casts the inputs under mixed precision (ops/precision.h). Every op states one
  // (OpRegistry.EveryOpHasReferenceKernelGradientRuleAndTests checks).
  std::optional<PrecisionRule> precision = std::nullopt;
  // On a CPU without native 16-bit arithmetic, f16 / bf16 calls widen to f32 and run the best
  // f32 kernel (src/kernels/cpu/widened_kernels.cc): set where that beats the reference kernel.
  bool widen_16_bit = false;
  int num_inputs = 0;  // with variadic_inputs: the minimum
  bool variadic_inputs = false;
  InferFn infer = nullptr;
  // Null only when `differentiable` is false.
  GradientFn gradient = nullptr;
  bool differentiable = true;
  // Which input's dtype selects the kernel; -1 selects by output 0's dtype (ops without inputs).
  int dispatch_input = 0;
  // The single output is input 0's data under another shape (reshape, identity):
  // eager mode returns a view and the kernel copies only when given a separate buffer.
  bool output_aliases_input = false;
  // Writes into an input's memory (assign): graph passes keep it, in program order.
  bool has_side_effects = false;
  // With has_side_effects: how many leading inputs the op overwrites in place, from its attributes
  // (adam_update: the weights and both slots of every tensor). Null: input 0 only (assign).
  std::function<size_t(const Attrs&)> written_inputs_of = nullptr;

  // Filled by the registry: kernels per (device type id, dtype of the dispatch input), highest priority first.
  std::vector<std::array<std::vector<KernelDef>, kNumDTypes>> kernel_table{};

  // Empty where the device type has no kernel for the dtype.
  const std::vector<KernelDef>& kernels(DeviceType device, DType dtype) const;
  // The dtypes for which a CPU reference kernel exists.
  std::vector<DType> reference_dtypes() const;
  // How many leading inputs a call with these attributes writes into: 0 without side effects.
  size_t written_inputs(const Attrs& attrs) const {
    if (!has_side_effects) return 0;
    return written_inputs_of ? written_inputs_of(attrs) : 1;
  }
};

}  // namespace nimbus
