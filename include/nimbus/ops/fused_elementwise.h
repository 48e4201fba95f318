// fused_elementwise: one op that runs a chain of elementwise ops (an
// expression program) in a single pass over memory. Graph mode's fusion pass
// (the JIT switch) builds it; backends evaluate it block by block so that
// intermediates stay in cache (CPU) or registers (GPU).
//
// A program is a list of instructions, each an elementwise op from the
// registry with its attributes, reading the fused op's inputs (i0, i1, ...)
// or earlier results (t0, t1, ...). Inputs may broadcast to the fused op's
// shape; every instruction's result has that shape. Printed form:
//   t0 = mul(i0, i1); t1 = add(t0, i2); t2 = gelu(t1) {approximate="tanh"} -> t2
//
// f16 and bf16 values are held in f32 inside a program, as a GPU holds them
// in f32 registers: a 16-bit input is widened, every instruction computes in
// f32, and a value is rounded to 16 bits only at a cast to f16/bf16 and at
// a 16-bit output. So a program over 16-bit data rounds less often than its
// unfused ops (each of which rounds its result) and may differ from them in
// the last bit; over f32, f64 and bool it means exactly what they mean.
//
// The reference kernel runs each instruction through its op's own reference
// kernel on the held values (casts to f16/bf16 round and widen back).
#pragma once

#include <vector>

#include "nimbus/ops/op_schema.h"

namespace nimbus {

struct ExpressionOperand {
  bool is_input = true;  // an input of the fused op, or an earlier instruction's result
  int index = 0;
  bool operator==(const ExpressionOperand&) const = default;
};

struct ExpressionInstruction {
  const OpSchema* op = nullptr;
  Attrs attrs;
  std::vector<ExpressionOperand> operands;
  DType dtype = DType::kF32;  // of the result
};

class ExpressionProgram final : public AttrObject {
 public:
  std::vector<ExpressionInstruction> instructions;
  // Which instructions' results are the fused op's outputs, in output order.
  std::vector<int> outputs;

  std::string to_string() const override;
};

// A fused op over `inputs` computing `program` at `shape`.
std::vector<Tensor> fused_elementwise(std::span<const Tensor> inputs, std::shared_ptr<const ExpressionProgram> program,
                                      const Shape& shape);

// The registered schema (graph passes create fused nodes from it).
const OpSchema& fused_elementwise_op();

// Backends run a program over blocks of this many elements. The CPU kernel keeps, per compute thread and
// between calls, a scratch of one block per instruction and per input that is neither of the fused shape
// nor a single element (a broadcast input is gathered into it).
inline constexpr int64_t kFusedBlockElements = 8192;
// That scratch's bytes for one thread: the memory accounting counts it as workspace (graph/memory_estimate.h).
size_t fused_elementwise_scratch_bytes(const ExpressionProgram& program, std::span<const TensorSpec> inputs,
                                       const Shape& shape);

}  // namespace nimbus
