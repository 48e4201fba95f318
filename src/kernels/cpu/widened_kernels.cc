// f16 and bf16 on a CPU without native 16-bit arithmetic: the ops whose
// schema sets widen_16_bit widen their 16-bit inputs to f32 (the vectorized
// F16C / bf16 casts), run their best f32 kernel (oneDNN, vectorized) and round
// the results back to the output's dtype, once. Above the reference kernels (which convert element by
// element) and below any native 16-bit kernel a backend registers.
//   ops: matmul, convolutions and their gradients, pooling, the elementwise
//        arithmetic and activations of a layer, comparisons, sums and maxima
//        (each family file in src/ops/ says which).
// The f32 temporaries are workspace that lives only for the call.
#include <vector>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/half_convert.h"

namespace nimbus::cpu {
namespace {

// Runs the best kernel other than this one for (op, inputs) into outputs.
void run_best(const OpSchema& op, const Attrs& attrs, std::span<const Tensor> inputs, std::span<Tensor> outputs,
              Stream& stream) {
  KernelContext context{op, attrs, inputs, outputs, stream};
  select_kernel(context).fn(context);
}

Tensor widen(const Tensor& source, DType dtype, Stream& stream) {
  static const OpSchema& cast = OpRegistry::global().get("cast");
  Tensor result = Tensor::empty(source.shape(), dtype, source.device());
  run_best(cast, Attrs{{"dtype", dtype}}, std::span<const Tensor>(&source, 1), std::span<Tensor>(&result, 1), stream);
  return result;
}

void run_widened(KernelContext& ctx) {
  std::vector<Tensor> inputs;
  inputs.reserve(ctx.inputs.size());
  for (const Tensor& input : ctx.inputs) {
    inputs.push_back(is_16_bit_float(input.dtype()) ? widen(input, DType::kF32, ctx.stream) : input);
  }
  std::vector<Tensor> outputs;
  outputs.reserve(ctx.outputs.size());
  for (const Tensor& output : ctx.outputs) {
    outputs.push_back(is_16_bit_float(output.dtype()) ? Tensor::empty(output.shape(), DType::kF32, output.device())
                                                      : output);
  }
  run_best(ctx.op, ctx.attrs, inputs, outputs, ctx.stream);
  static const OpSchema& cast = OpRegistry::global().get("cast");
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!is_16_bit_float(ctx.outputs[i].dtype())) continue;
    const Attrs to{{"dtype", ctx.outputs[i].dtype()}};
    run_best(cast, to, std::span<const Tensor>(&outputs[i], 1), ctx.outputs.subspan(i, 1), ctx.stream);
  }
}

const bool kRegistered =
    register_kernel_for_ops([](const OpSchema& op) { return op.widen_16_bit; }, {.name = "widened_f32",
                                                                                 .device = DeviceType::kCPU,
                                                                                 .dtypes = {DType::kF16, DType::kBF16},
                                                                                 .priority = 25,
                                                                                 .fn = run_widened});

}  // namespace
}  // namespace nimbus::cpu
