// Dropout: a random source op, dropout_mask, and dropout = x * mask, a
// composite whose gradient (g * mask) comes from mul's rule.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/registry.h"
#include "src/ops/internal/random_stream.h"

namespace nimbus {
namespace {

void check_rate(double rate, const std::string& op) {
  if (!(rate >= 0 && rate < 1)) {
    throw InvalidArgument(fmt::format("{}: rate is {}, it must be in [0, 1)", op, rate),
                          "rate is the fraction of elements set to zero: 0.5 drops half of them");
  }
}

const OpSchema& kDropoutMask = define_op({
    .name = "dropout_mask",
    .summary = "0 with probability rate, else 1 / (1 - rate), from Philox stream (seed, offset)",
    .kind = OpKind::kRandom,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 0,
    .infer =
        [](const InferContext& ctx) {
          const DType dtype = ctx.attrs.get_dtype("dtype");
          if (!is_floating(dtype)) {
            ctx.fail(fmt::format("dtype {} is not supported, a floating dtype is required", dtype_name(dtype)));
          }
          check_rate(ctx.attrs.get_float("rate"), ctx.op.name);
          return std::vector<TensorSpec>{{ctx.attrs.get_shape("shape"), dtype}};
        },
    .differentiable = false,
    .dispatch_input = -1,
});

// Element i keeps iff uniform number (offset + i) of the stream is >= rate. The
// draw is f32 for every dtype, so a seed gives the same mask in f32 and f64.
const bool kDropoutMaskReference = register_kernel(
    "dropout_mask",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const double rate = ctx.attrs.get_float("rate");
       const uint64_t seed = static_cast<uint64_t>(ctx.attrs.get_int("seed"));
       const uint64_t offset = static_cast<uint64_t>(ctx.attrs.get_int("offset"));
       visit_dtype(ctx.outputs[0].dtype(), [&]<typename T>() {
         T* out = static_cast<T*>(ctx.outputs[0].raw_data());
         const T keep = from_double<T>(1 / (1 - rate)), drop = from_double<T>(0);
         for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) {
           out[i] = philox_uniform(seed, offset + static_cast<uint64_t>(i)) < rate ? drop : keep;
         }
       });
     }});

}  // namespace

Tensor dropout(const Tensor& x, double rate, Generator* generator) {
  check_rate(rate, "dropout");
  if (!is_floating(x.dtype())) {
    throw InvalidArgument(fmt::format("dropout: x has dtype {}, a floating dtype is required", dtype_name(x.dtype())),
                          "convert it with .to(DType::kF32)");
  }
  if (rate == 0) return x;
  Attrs attrs{{"shape", x.shape()}, {"dtype", x.dtype()}, {"rate", rate}};
  internal::claim_random_stream(attrs, generator, x.numel());
  const Tensor mask = call_op1(kDropoutMask, {}, attrs, x.device());
  return mul(x, mask);
}

}  // namespace nimbus
