// Per-op precision rules and autocast: how mixed precision decides, op by op,
// which dtype an op computes in (docs/mixed_precision.md).
//
//   {
//     AutocastScope autocast(DType::kF16);   // a layer under mixed_float16 does this around its call
//     Tensor y = matmul(x_f32, w_f32);       // compute dtype: both inputs cast to f16, y is f16
//     Tensor p = softmax(y, -1);             // float32: y cast to f32, p is f32
//     Tensor z = add(y, bias_f32);           // follows its inputs: they differ, so both become f16
//   }
//
// Each op states its rule in its schema (OpSchema::precision, in
// src/ops/<family>.cc); a test walks the op registry and fails if an op has
// none. The rules apply in call_op while an AutocastScope is alive, so eager
// calls and traced graphs (which record the casts as nodes) get the same casts.
#pragma once

#include <span>
#include <vector>

#include "nimbus/ops/op_schema.h"

namespace nimbus {

// While alive, op calls on this thread follow the precision rules with `compute_dtype`
// (f16 or bf16; f32 turns autocast off inside an outer scope). Scopes nest.
class AutocastScope {
 public:
  explicit AutocastScope(DType compute_dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  DType previous_;
};

// The compute dtype of the innermost AutocastScope on this thread (f32 when none).
DType autocast_dtype();

// The inputs an op call under autocast should see: `inputs` with the floating ones cast as the op's
// rule says, or an empty vector when no input needs a cast. Only f32, f16 and bf16 inputs are cast
// (f64 and integers never are).
std::vector<Tensor> autocast_inputs(const OpSchema& op, std::span<const Tensor> inputs, DType compute_dtype);

}  // namespace nimbus
