// assign: writes a value into an existing tensor's memory, in place. This is
// how variables update (Variable::assign), as an op so that a traced training
// step records its optimizer updates.
#include "nimbus/ops/assign.h"

#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

const OpSchema& kAssign = define_op({
    .name = "assign",
    .summary = "target <- value, in place (variable updates); no outputs",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kKeepInputs,  // writes into input 0: casting it would write into a copy
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_same_dtype(0, 1);
          if (ctx.inputs[0].shape != ctx.inputs[1].shape) {
            ctx.fail(fmt::format("the value has shape {}, the target {}", ctx.inputs[1].shape.to_string(),
                                 ctx.inputs[0].shape.to_string()));
          }
          return std::vector<TensorSpec>{};
        },
    .differentiable = false,
    .has_side_effects = true,
});

// Copies input 1 over input 0's memory.
void assign_kernel(KernelContext& ctx) {
  Tensor target = ctx.inputs[0];
  target.copy_from(ctx.inputs[1]);
}

const bool kAssignReference = register_kernel(
    "assign",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = assign_kernel});

}  // namespace

void assign(const Tensor& target, const Tensor& value) { call_op(kAssign, {target, value}); }

}  // namespace nimbus
