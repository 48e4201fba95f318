#include "nimbus/ops/fused_elementwise.h"

#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"

namespace nimbus {

std::string ExpressionProgram::to_string() const {
  std::vector<std::string> parts;
  for (size_t t = 0; t < instructions.size(); ++t) {
    const ExpressionInstruction& instruction = instructions[t];
    std::vector<std::string> operands;
    for (const ExpressionOperand& operand : instruction.operands) {
      operands.push_back(fmt::format("{}{}", operand.is_input ? 'i' : 't', operand.index));
    }
    const std::string attrs =
        instruction.attrs.entries().empty() ? "" : fmt::format(" {{{}}}", instruction.attrs.to_string());
    parts.push_back(fmt::format("t{} = {}({}){}", t, instruction.op->name, fmt::join(operands, ", "), attrs));
  }
  std::vector<std::string> results;
  for (int output : outputs) results.push_back(fmt::format("t{}", output));
  return fmt::format("{} -> {}", fmt::join(parts, "; "), fmt::join(results, ", "));
}

namespace {

const ExpressionProgram& program_of(const Attrs& attrs) {
  const auto* program = dynamic_cast<const ExpressionProgram*>(attrs.get_object("program").get());
  NIMBUS_ASSERT(program != nullptr) << "fused_elementwise without an expression program";
  return *program;
}

const OpSchema& kFusedElementwise = define_op({
    .name = "fused_elementwise",
    .summary = "a chain of elementwise ops (an expression program) in one pass; built by graph fusion",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kKeepInputs,  // built by fusion from ops whose casts are already in the graph
    .num_inputs = 1,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          const ExpressionProgram& program = program_of(ctx.attrs);
          const Shape& shape = ctx.attrs.get_shape("shape");
          for (size_t i = 0; i < ctx.inputs.size(); ++i) {
            if (broadcast_shapes(ctx.inputs[i].shape, shape, "fused_elementwise") != shape) {
              ctx.fail(fmt::format("input {} of shape {} does not broadcast to the fused shape {}", i,
                                   ctx.inputs[i].shape.to_string(), shape.to_string()));
            }
          }
          std::vector<TensorSpec> outputs;
          for (int t : program.outputs) outputs.push_back({shape, program.instructions[static_cast<size_t>(t)].dtype});
          return outputs;
        },
    .differentiable = false,
});

bool is_16_bit_float(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

// `value` cast to `dtype` by the reference kernel.
Tensor reference_cast(const Tensor& value, DType dtype, Stream& stream) {
  static const OpSchema& cast = OpRegistry::global().get("cast");
  std::vector<Tensor> outputs = {Tensor::empty(value.shape(), dtype, stream.device())};
  ReferenceKernelsScope reference;
  run_kernel(cast, Attrs{{"dtype", dtype}}, std::span<const Tensor>(&value, 1), outputs);
  return outputs[0];
}

// Runs each instruction through its own op's reference kernel on whole tensors, f16 and bf16 values
// held in f32 (the header says why).
void reference_fused(KernelContext& ctx) {
  static const OpSchema& cast = OpRegistry::global().get("cast");
  const ExpressionProgram& program = program_of(ctx.attrs);
  const auto held = [&](const Tensor& value) {
    return is_16_bit_float(value.dtype()) ? reference_cast(value, DType::kF32, ctx.stream) : value;
  };
  std::vector<Tensor> inputs;
  for (const Tensor& input : ctx.inputs) inputs.push_back(held(input));
  std::vector<Tensor> results;
  results.reserve(program.instructions.size());
  for (const ExpressionInstruction& instruction : program.instructions) {
    std::vector<Tensor> operands;
    std::vector<TensorSpec> specs;
    for (const ExpressionOperand& operand : instruction.operands) {
      operands.push_back(operand.is_input ? inputs[static_cast<size_t>(operand.index)]
                                          : results[static_cast<size_t>(operand.index)]);
      specs.push_back({operands.back().shape(), operands.back().dtype()});
    }
    if (instruction.op == &cast && is_16_bit_float(instruction.dtype)) {
      // Rounds to the 16-bit dtype, held in f32.
      results.push_back(held(reference_cast(operands[0], instruction.dtype, ctx.stream)));
      continue;
    }
    const TensorSpec out = infer_outputs(*instruction.op, specs, instruction.attrs).at(0);
    std::vector<Tensor> outputs = {Tensor::empty(out.shape, out.dtype, ctx.stream.device())};
    ReferenceKernelsScope reference;
    run_kernel(*instruction.op, instruction.attrs, operands, outputs);
    results.push_back(outputs[0]);
  }
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const Tensor& result = results[static_cast<size_t>(program.outputs[k])];
    ctx.outputs[k].copy_from(
        result.dtype() == ctx.outputs[k].dtype() ? result : reference_cast(result, ctx.outputs[k].dtype(), ctx.stream));
  }
}

const bool kFusedReference =
    register_kernel("fused_elementwise", {.name = kReferenceKernel,
                                          .dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kBool},
                                          .fn = reference_fused});

}  // namespace

const OpSchema& fused_elementwise_op() { return kFusedElementwise; }

size_t fused_elementwise_scratch_bytes(const ExpressionProgram& program, std::span<const TensorSpec> inputs,
                                       const Shape& shape) {
  const auto held_size = [](DType dtype) { return is_16_bit_float(dtype) ? sizeof(float) : dtype_size(dtype); };
  size_t bytes = 0;
  for (const TensorSpec& input : inputs) {
    if (input.shape != shape && input.shape.numel() != 1) bytes += kFusedBlockElements * dtype_size(input.dtype);
    if (held_size(input.dtype) != dtype_size(input.dtype)) bytes += kFusedBlockElements * sizeof(float);
  }
  for (const ExpressionInstruction& instruction : program.instructions) {
    bytes += kFusedBlockElements * held_size(instruction.dtype);
  }
  return bytes;
}

std::vector<Tensor> fused_elementwise(std::span<const Tensor> inputs, std::shared_ptr<const ExpressionProgram> program,
                                      const Shape& shape) {
  return call_op(kFusedElementwise, inputs, Attrs{{"program", AttrObjectPtr(std::move(program))}, {"shape", shape}});
}

}  // namespace nimbus
