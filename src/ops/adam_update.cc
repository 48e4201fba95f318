// adam_update: Adam's and AdamW's update of many tensors in one op, in place
// (include/nimbus/ops/optimizer_updates.h has the formula). It writes its
// leading 3 * count inputs (the weights, then m, then v), so it has side
// effects and no outputs, like assign; graph passes learn which inputs it
// writes from written_inputs_of.
#include <fmt/format.h>

#include <type_traits>
#include <vector>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/adam_update_call.h"
#include "nimbus/ops/optimizer_updates.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

size_t count_of(const Attrs& attrs) { return static_cast<size_t>(attrs.get_int("count")); }

void expect_scalar(const InferContext& ctx, size_t index, DType dtype, const char* name) {
  const TensorSpec& spec = ctx.inputs[index];
  if (spec.dtype != dtype || spec.shape.rank() != 0) {
    ctx.fail(fmt::format("{} (input {}) is a {} {}, it must be a {} scalar", name, index, dtype_name(spec.dtype),
                         spec.shape.to_string(), dtype_name(dtype)));
  }
}

const OpSchema& kAdamUpdate = define_op({
    .name = "adam_update",
    .summary = "Adam / AdamW update of count (weight, m, v) triples from their gradients, in place; no outputs",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kKeepInputs,  // writes into its weights and slots: casting them would write into copies
    .num_inputs = 6,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          const int64_t count = ctx.attrs.get_int("count");
          const size_t n = static_cast<size_t>(count);
          if (count < 1 || (ctx.inputs.size() != 4 * n + 2 && ctx.inputs.size() != 4 * n + 3)) {
            ctx.fail(
                fmt::format("{} inputs for count {}: expected 4 * count + 2 (weights, m, v, gradients, alpha, "
                            "decay) or one more (apply)",
                            ctx.inputs.size(), count));
          }
          ctx.expect_floating(0);
          const char* names[] = {"weight", "m", "v", "gradient"};
          for (size_t i = 0; i < n; ++i) {
            for (size_t part = 0; part < 4; ++part) {
              const TensorSpec& spec = ctx.inputs[part * n + i];
              if (spec.dtype != ctx.inputs[0].dtype || spec.shape != ctx.inputs[i].shape) {
                ctx.fail(fmt::format("{} {} is a {} {}, weight {} a {} {}; weights 0 to {} share one dtype, and each "
                                     "weight's m, v and gradient have its shape",
                                     names[part], i, dtype_name(spec.dtype), spec.shape.to_string(), i,
                                     dtype_name(ctx.inputs[i].dtype), ctx.inputs[i].shape.to_string(), n - 1),
                         "call adam_update once per dtype");
              }
            }
          }
          expect_scalar(ctx, 4 * n, DType::kF64, "alpha");
          expect_scalar(ctx, 4 * n + 1, DType::kF64, "decay");
          if (ctx.inputs.size() == 4 * n + 3) expect_scalar(ctx, 4 * n + 2, DType::kBool, "apply");
          return std::vector<TensorSpec>{};
        },
    .differentiable = false,
    .has_side_effects = true,
    .written_inputs_of = [](const Attrs& attrs) { return 3 * count_of(attrs); },
});

// One pass over each tensor on the calling thread; the CPU backend's kernel
// (src/kernels/cpu/adam_update_kernel.cc) splits them over its threads.
const bool kAdamUpdateReference = register_kernel(
    "adam_update", {.name = kReferenceKernel, .dtypes = {DType::kF32, DType::kF64}, .fn = [](KernelContext& ctx) {
                      const internal::AdamUpdateCall call(ctx.inputs, ctx.attrs);
                      if (call.has_apply() && !call.apply().item<bool>()) return;
                      visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
                          const internal::AdamUpdateScalars<T> scalars(call, ctx.attrs);
                          for (size_t i = 0; i < call.count; ++i) {
                            // Written in place: the kernel's inputs are the variables' own tensors.
                            Tensor w = call.weight(i), m = call.m(i), v = call.v(i);
                            internal::adam_update_elements(static_cast<T*>(w.raw_data()), static_cast<T*>(m.raw_data()),
                                                           static_cast<T*>(v.raw_data()),
                                                           static_cast<const T*>(call.gradient(i).raw_data()), 0,
                                                           w.numel(), scalars);
                          }
                        }
                      });
                    }});

}  // namespace

void adam_update(std::span<const Tensor> weights, std::span<const Tensor> m, std::span<const Tensor> v,
                 std::span<const Tensor> gradients, const Tensor& alpha, const Tensor& decay,
                 const AdamUpdateOptions& options, const Tensor& apply) {
  const size_t n = weights.size();
  if (n == 0) return;
  if (m.size() != n || v.size() != n || gradients.size() != n) {
    throw InvalidArgument(fmt::format("adam_update: {} weights, {} m, {} v and {} gradients; one of each per weight", n,
                                      m.size(), v.size(), gradients.size()));
  }
  std::vector<Tensor> inputs;
  inputs.reserve(4 * n + 3);
  for (std::span<const Tensor> part : {weights, m, v, gradients}) inputs.insert(inputs.end(), part.begin(), part.end());
  inputs.push_back(alpha);
  inputs.push_back(decay);
  if (apply.defined()) inputs.push_back(apply);
  call_op(kAdamUpdate, inputs,
          Attrs{{"count", static_cast<int64_t>(n)},
                {"beta_1", options.beta_1},
                {"beta_2", options.beta_2},
                {"epsilon", options.epsilon},
                {"weight_decay", options.weight_decay}});
}

}  // namespace nimbus
