// Cases for the optimizer-update ops. adam_update writes its weights and
// slots: OpSideEffects compares what each kernel wrote (and the gpu suite's
// harness the CUDA kernel against the reference).
#include "op_cases.h"

namespace nimbus::testing {

namespace {

// Three tensors of unlike shapes (one 1-element): weights, m, v (never negative: it is a mean of
// squares), gradients, then the f64 step scalars, then `apply` when given.
std::vector<InputSpec> adam_inputs(double alpha, double decay, bool with_apply) {
  const std::vector<Shape> shapes = {{4, 3}, {5}, {2, 3, 2}, {1}};
  std::vector<InputSpec> inputs;
  for (const Shape& shape : shapes) inputs.push_back({shape});
  for (const Shape& shape : shapes) inputs.push_back({shape, DType::kF32, -0.5, 0.5});
  for (const Shape& shape : shapes) inputs.push_back({shape, DType::kF32, 0.1, 1.0});
  for (const Shape& shape : shapes) inputs.push_back({shape});
  inputs.push_back({.shape = {}, .dtype = DType::kF64, .values = {alpha}, .fixed_dtype = true});
  inputs.push_back({.shape = {}, .dtype = DType::kF64, .values = {decay}, .fixed_dtype = true});
  if (with_apply) inputs.push_back({.shape = {}, .dtype = DType::kBool, .values = {1.0}});
  return inputs;
}

Attrs adam_attrs(bool weight_decay) {
  return Attrs{
      {"count", int64_t{4}}, {"beta_1", 0.9}, {"beta_2", 0.999}, {"epsilon", 1e-7}, {"weight_decay", weight_decay}};
}

}  // namespace

NIMBUS_OP_CASES(optimizer_updates) {
  add_op_case({.name = "adam_update",
               .op = "adam_update",
               .inputs = adam_inputs(0.05, 0.0, false),
               .attrs = adam_attrs(false)});
  add_op_case({.name = "adam_update_decoupled_decay_applied",
               .op = "adam_update",
               .inputs = adam_inputs(0.05, 0.01, true),
               .attrs = adam_attrs(true)});
}

}  // namespace nimbus::testing
