// Batch normalization (training and inference) and layer normalization,
// with their backward ops. The training ops also output their statistics
// (batch mean and biased variance; per-row mean and 1/sqrt(var + eps)),
// and their gradient rules honor gradients that flow into those outputs too.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using internal::AxisSplit;

// ---- shared by batch norm ----

// The channel axis: last for NHWC (and for any data_format at rank 2), 1 for NCHW.
int channel_axis(const Shape& x, const Attrs& attrs, const std::string& op) {
  return internal::parse_channels_last(attrs.get_string("data_format"), op) ? x.rank() - 1 : 1;
}

// Checks x (input `x_index`) and returns its channel count.
int64_t check_normalized_input(const InferContext& ctx, int x_index) {
  ctx.expect_floating(x_index);
  const Shape& x = ctx.inputs[static_cast<size_t>(x_index)].shape;
  if (x.rank() < 2) {
    ctx.fail(fmt::format("x has shape {}, batch normalization needs rank 2 or more (a batch axis and a channel axis)",
                         x.to_string()));
  }
  if (ctx.attrs.get_float("epsilon") < 0) {
    ctx.fail(fmt::format("epsilon is {}, it must not be negative", ctx.attrs.get_float("epsilon")));
  }
  return x.dims()[static_cast<size_t>(channel_axis(x, ctx.attrs, ctx.op.name))];
}

// Input `index` must be a vector of `size` elements with input 0's dtype.
void expect_vector(const InferContext& ctx, int index, const char* name, int64_t size, const Shape& x) {
  ctx.expect_same_dtype(0, index);
  if (ctx.inputs[static_cast<size_t>(index)].shape != Shape{size}) {
    ctx.fail(fmt::format("{} has shape {}, but x {} needs one value per channel: shape [{}]", name,
                         ctx.inputs[static_cast<size_t>(index)].shape.to_string(), x.to_string(), size));
  }
}

// x viewed as (outer, C, inner) around the channel axis.
AxisSplit channel_split(const Shape& x, const Attrs& attrs, const std::string& op) {
  return AxisSplit(x, channel_axis(x, attrs, op));
}

// A per-channel vector (C) reshaped to broadcast against x: (1, C, 1, 1) for NCHW, (1, 1, 1, C) for NHWC.
Tensor per_channel(const Tensor& v, const Tensor& x, const Attrs& attrs, const std::string& op) {
  const int axis = channel_axis(x.shape(), attrs, op);
  Shape shape;
  for (int i = 0; i < x.rank(); ++i) shape.push_back(i == axis ? x.dim(axis) : 1);
  return reshape(v, shape);
}

// Every axis but the channel axis.
std::vector<int64_t> non_channel_axes(const Tensor& x, const Attrs& attrs, const std::string& op) {
  const int axis = channel_axis(x.shape(), attrs, op);
  std::vector<int64_t> axes;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != axis) axes.push_back(i);
  }
  return axes;
}

Attrs norm_attrs(double epsilon, const std::string& data_format) {
  return Attrs{{"epsilon", epsilon}, {"data_format", data_format}};
}

template <typename T>
const T* data_of(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <typename T>
T* data_of(Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// ---- batch_norm_backward ----

const OpSchema& kBatchNormBackward = define_op({
    .name = "batch_norm_backward",
    .summary = "gradients (x, gamma, beta) of batch_norm_training from (grad_y, x, gamma, mean, variance)",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,  // normalization statistics
    .num_inputs = 5,
    .infer =
        [](const InferContext& ctx) {
          const int64_t channels = check_normalized_input(ctx, 1);
          const Shape& x = ctx.inputs[1].shape;
          ctx.expect_same_dtype(0, 1);
          if (ctx.inputs[0].shape != x) {
            ctx.fail(fmt::format("grad_y has shape {}, x {}: they must match", ctx.inputs[0].shape.to_string(),
                                 x.to_string()));
          }
          expect_vector(ctx, 2, "gamma", channels, x);
          expect_vector(ctx, 3, "mean", channels, x);
          expect_vector(ctx, 4, "variance", channels, x);
          const DType dtype = ctx.inputs[0].dtype;
          return std::vector<TensorSpec>{{x, dtype}, {Shape{channels}, dtype}, {Shape{channels}, dtype}};
        },
    .differentiable = false,
});

// grad_y, x (outer, C, inner); gamma, mean, variance (C) -> grad_x (outer, C, inner), grad_gamma, grad_beta (C).
// With xhat = (x - mean) rstd over the M = outer * inner elements of a channel:
// grad_beta = sum(g), grad_gamma = sum(g xhat), grad_x = gamma rstd / M (M g - grad_beta - xhat grad_gamma).
const bool kBatchNormBackwardReference = register_kernel(
    "batch_norm_backward",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const AxisSplit s = channel_split(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
       const double epsilon = ctx.attrs.get_float("epsilon");
       const double count = static_cast<double>(s.outer * s.inner);
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         const T *g = data_of<T>(ctx.inputs[0]), *x = data_of<T>(ctx.inputs[1]), *gamma = data_of<T>(ctx.inputs[2]),
                 *mean = data_of<T>(ctx.inputs[3]), *variance = data_of<T>(ctx.inputs[4]);
         T *grad_x = data_of<T>(ctx.outputs[0]), *grad_gamma = data_of<T>(ctx.outputs[1]),
           *grad_beta = data_of<T>(ctx.outputs[2]);
         for (int64_t c = 0; c < s.axis; ++c) {
           const double mu = to_double(mean[c]), rstd = 1 / std::sqrt(to_double(variance[c]) + epsilon);
           double sum_g = 0, sum_g_xhat = 0;
           for (int64_t o = 0; o < s.outer; ++o) {
             for (int64_t i = 0; i < s.inner; ++i) {
               const int64_t k = (o * s.axis + c) * s.inner + i;
               sum_g += to_double(g[k]);
               sum_g_xhat += to_double(g[k]) * (to_double(x[k]) - mu) * rstd;
             }
           }
           const double scale = to_double(gamma[c]) * rstd / count;
           for (int64_t o = 0; o < s.outer; ++o) {
             for (int64_t i = 0; i < s.inner; ++i) {
               const int64_t k = (o * s.axis + c) * s.inner + i;
               const double xhat = (to_double(x[k]) - mu) * rstd;
               grad_x[k] = from_double<T>(scale * (count * to_double(g[k]) - sum_g - xhat * sum_g_xhat));
             }
           }
           grad_gamma[c] = from_double<T>(sum_g_xhat);
           grad_beta[c] = from_double<T>(sum_g);
         }
       });
     }});

// ---- batch_norm_training ----

const OpSchema& kBatchNormTraining = define_op({
    .name = "batch_norm_training",
    .summary =
        "(x - batch mean) / sqrt(batch variance + eps) * gamma + beta; also returns the mean and biased variance",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 3,
    .infer =
        [](const InferContext& ctx) {
          const int64_t channels = check_normalized_input(ctx, 0);
          const Shape& x = ctx.inputs[0].shape;
          expect_vector(ctx, 1, "gamma", channels, x);
          expect_vector(ctx, 2, "beta", channels, x);
          const DType dtype = ctx.inputs[0].dtype;
          return std::vector<TensorSpec>{{x, dtype}, {Shape{channels}, dtype}, {Shape{channels}, dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& x = ctx.inputs[0];
          const Tensor &mean = ctx.outputs[1], &variance = ctx.outputs[2];
          std::vector<Tensor> grads =
              call_op(kBatchNormBackward, {ctx.grad_output(0), x, ctx.inputs[1], mean, variance}, ctx.attrs);
          // The statistics are functions of x too: d mean / dx = 1 / M, d variance / dx = 2 (x - mean) / M.
          const double count = static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(mean.numel(), 1));
          if (ctx.grad_outputs[1].defined()) {
            grads[0] =
                add(grads[0], per_channel(div(ctx.grad_outputs[1], scalar_like(x, count)), x, ctx.attrs, ctx.op.name));
          }
          if (ctx.grad_outputs[2].defined()) {
            const Tensor centered = sub(x, per_channel(mean, x, ctx.attrs, ctx.op.name));
            const Tensor scale = mul(ctx.grad_outputs[2], scalar_like(x, 2.0 / count));
            grads[0] = add(grads[0], mul(centered, per_channel(scale, x, ctx.attrs, ctx.op.name)));
          }
          return grads;
        },
});

// x (outer, C, inner), gamma, beta (C) -> y (outer, C, inner), mean, variance (C); two passes in double.
const bool kBatchNormTrainingReference = register_kernel(
    "batch_norm_training",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const AxisSplit s = channel_split(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
       const double epsilon = ctx.attrs.get_float("epsilon");
       const double count = static_cast<double>(s.outer * s.inner);
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         const T *x = data_of<T>(ctx.inputs[0]), *gamma = data_of<T>(ctx.inputs[1]), *beta = data_of<T>(ctx.inputs[2]);
         T *y = data_of<T>(ctx.outputs[0]), *mean = data_of<T>(ctx.outputs[1]), *variance = data_of<T>(ctx.outputs[2]);
         for (int64_t c = 0; c < s.axis; ++c) {
           double total = 0, squares = 0;
           for (int64_t o = 0; o < s.outer; ++o) {
             for (int64_t i = 0; i < s.inner; ++i) total += to_double(x[(o * s.axis + c) * s.inner + i]);
           }
           const double mu = total / count;
           for (int64_t o = 0; o < s.outer; ++o) {
             for (int64_t i = 0; i < s.inner; ++i) {
               const double d = to_double(x[(o * s.axis + c) * s.inner + i]) - mu;
               squares += d * d;
             }
           }
           const double var = squares / count, rstd = 1 / std::sqrt(var + epsilon);
           for (int64_t o = 0; o < s.outer; ++o) {
             for (int64_t i = 0; i < s.inner; ++i) {
               const int64_t k = (o * s.axis + c) * s.inner + i;
               y[k] = from_double<T>((to_double(x[k]) - mu) * rstd * to_double(gamma[c]) + to_double(beta[c]));
             }
           }
           mean[c] = from_double<T>(mu);
           variance[c] = from_double<T>(var);
         }
       });
     }});

// ---- batch_norm_inference ----

const OpSchema& kBatchNormInference = define_op({
    .name = "batch_norm_inference",
    .summary = "(x - mean) / sqrt(variance + eps) * gamma + beta with given (moving) statistics",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 5,
    .infer =
        [](const InferContext& ctx) {
          const int64_t channels = check_normalized_input(ctx, 0);
          const Shape& x = ctx.inputs[0].shape;
          expect_vector(ctx, 1, "gamma", channels, x);
          expect_vector(ctx, 2, "beta", channels, x);
          expect_vector(ctx, 3, "mean", channels, x);
          expect_vector(ctx, 4, "variance", channels, x);
          return std::vector<TensorSpec>{ctx.inputs[0]};
        },
    .gradient =
        [](const GradContext& ctx) {
          // y = (x - mean) rstd gamma + beta with rstd = (variance + eps)^-1/2, per channel.
          const Tensor &x = ctx.inputs[0], &gamma = ctx.inputs[1], &mean = ctx.inputs[3], &variance = ctx.inputs[4];
          const Tensor g = ctx.grad_output(0);
          auto channel = [&](const Tensor& v) { return per_channel(v, x, ctx.attrs, ctx.op.name); };
          const std::vector<int64_t> axes = non_channel_axes(x, ctx.attrs, ctx.op.name);
          const Tensor rstd = rsqrt(add(variance, scalar_like(variance, ctx.attrs.get_float("epsilon"))));
          const Tensor gamma_rstd = mul(gamma, rstd);
          std::vector<Tensor> grads(5);
          if (ctx.needs(0)) grads[0] = mul(g, channel(gamma_rstd));
          const Tensor sum_g = sum(g, axes);
          if (ctx.needs(2)) grads[2] = sum_g;
          if (ctx.needs(3)) grads[3] = neg(mul(sum_g, gamma_rstd));
          if (ctx.needs(1) || ctx.needs(4)) {
            const Tensor sum_g_centered = sum(mul(g, sub(x, channel(mean))), axes);
            if (ctx.needs(1)) grads[1] = mul(sum_g_centered, rstd);
            if (ctx.needs(4)) {
              // d rstd / d variance = -rstd^3 / 2
              const Tensor rstd_cubed = mul(rstd, square(rstd));
              grads[4] = mul(mul(sum_g_centered, gamma), mul(rstd_cubed, scalar_like(x, -0.5)));
            }
          }
          return grads;
        },
});

// x (outer, C, inner); gamma, beta, mean, variance (C) -> y (outer, C, inner).
const bool kBatchNormInferenceReference = register_kernel(
    "batch_norm_inference",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const AxisSplit s = channel_split(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
       const double epsilon = ctx.attrs.get_float("epsilon");
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         const T *x = data_of<T>(ctx.inputs[0]), *gamma = data_of<T>(ctx.inputs[1]), *beta = data_of<T>(ctx.inputs[2]),
                 *mean = data_of<T>(ctx.inputs[3]), *variance = data_of<T>(ctx.inputs[4]);
         T* y = data_of<T>(ctx.outputs[0]);
         for (int64_t o = 0; o < s.outer; ++o) {
           for (int64_t c = 0; c < s.axis; ++c) {
             const double rstd = 1 / std::sqrt(to_double(variance[c]) + epsilon);
             for (int64_t i = 0; i < s.inner; ++i) {
               const int64_t k = (o * s.axis + c) * s.inner + i;
               y[k] = from_double<T>((to_double(x[k]) - to_double(mean[c])) * rstd * to_double(gamma[c]) +
                                     to_double(beta[c]));
             }
           }
         }
       });
     }});

// ---- layer_norm ----

// Checks x (input `x_index`, rank >= 1) and returns D, the size of its last axis.
int64_t check_layer_norm_input(const InferContext& ctx, int x_index) {
  ctx.expect_floating(x_index);
  const Shape& x = ctx.inputs[static_cast<size_t>(x_index)].shape;
  if (x.rank() < 1) ctx.fail("x is a scalar, layer normalization needs an axis to normalize over");
  return x[-1];
}

Shape row_shape(const Shape& x) {
  return Shape(std::span<const int64_t>(x.begin(), static_cast<size_t>(x.rank() - 1)));
}

void expect_row_stat(const InferContext& ctx, int index, const char* name, const Shape& x) {
  ctx.expect_same_dtype(0, index);
  if (ctx.inputs[static_cast<size_t>(index)].shape != row_shape(x)) {
    ctx.fail(fmt::format("{} has shape {}, but x {} needs one value per row: shape {}", name,
                         ctx.inputs[static_cast<size_t>(index)].shape.to_string(), x.to_string(),
                         row_shape(x).to_string()));
  }
}

void expect_feature_vector(const InferContext& ctx, int index, const char* name, int64_t size, const Shape& x) {
  ctx.expect_same_dtype(0, index);
  if (ctx.inputs[static_cast<size_t>(index)].shape != Shape{size}) {
    ctx.fail(fmt::format("{} has shape {}, but x {} needs one value per feature of the last axis: shape [{}]", name,
                         ctx.inputs[static_cast<size_t>(index)].shape.to_string(), x.to_string(), size));
  }
}

const OpSchema& kLayerNormBackward = define_op({
    .name = "layer_norm_backward",
    .summary = "gradients (x, gamma, beta) of layer_norm from (grad_y, x, gamma, mean, rstd)",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 5,
    .infer =
        [](const InferContext& ctx) {
          const int64_t features = check_layer_norm_input(ctx, 1);
          const Shape& x = ctx.inputs[1].shape;
          ctx.expect_same_dtype(0, 1);
          if (ctx.inputs[0].shape != x) {
            ctx.fail(fmt::format("grad_y has shape {}, x {}: they must match", ctx.inputs[0].shape.to_string(),
                                 x.to_string()));
          }
          expect_feature_vector(ctx, 2, "gamma", features, x);
          expect_row_stat(ctx, 3, "mean", x);
          expect_row_stat(ctx, 4, "rstd", x);
          const DType dtype = ctx.inputs[0].dtype;
          return std::vector<TensorSpec>{{x, dtype}, {Shape{features}, dtype}, {Shape{features}, dtype}};
        },
    .differentiable = false,
});

// grad_y, x (R, D); gamma (D); mean, rstd (R) -> grad_x (R, D), grad_gamma, grad_beta (D).
// Per row, with xhat = (x - mean) rstd and dxhat = g gamma:
// grad_x = rstd / D (D dxhat - sum(dxhat) - xhat sum(dxhat xhat)).
const bool kLayerNormBackwardReference = register_kernel(
    "layer_norm_backward",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const int64_t features = ctx.inputs[1].dim(-1);
       const int64_t rows = features == 0 ? 0 : ctx.inputs[1].numel() / features;
       const double d = static_cast<double>(features);
       std::vector<double> grad_gamma(static_cast<size_t>(features), 0.0),
           grad_beta(static_cast<size_t>(features), 0.0);
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         const T *g = data_of<T>(ctx.inputs[0]), *x = data_of<T>(ctx.inputs[1]), *gamma = data_of<T>(ctx.inputs[2]),
                 *mean = data_of<T>(ctx.inputs[3]), *rstd = data_of<T>(ctx.inputs[4]);
         T* grad_x = data_of<T>(ctx.outputs[0]);
         for (int64_t r = 0; r < rows; ++r) {
           const double mu = to_double(mean[r]), rs = to_double(rstd[r]);
           double sum_dxhat = 0, sum_dxhat_xhat = 0;
           for (int64_t j = 0; j < features; ++j) {
             const int64_t k = r * features + j;
             const double xhat = (to_double(x[k]) - mu) * rs, dxhat = to_double(g[k]) * to_double(gamma[j]);
             sum_dxhat += dxhat;
             sum_dxhat_xhat += dxhat * xhat;
             grad_gamma[static_cast<size_t>(j)] += to_double(g[k]) * xhat;
             grad_beta[static_cast<size_t>(j)] += to_double(g[k]);
           }
           for (int64_t j = 0; j < features; ++j) {
             const int64_t k = r * features + j;
             const double xhat = (to_double(x[k]) - mu) * rs, dxhat = to_double(g[k]) * to_double(gamma[j]);
             grad_x[k] = from_double<T>(rs / d * (d * dxhat - sum_dxhat - xhat * sum_dxhat_xhat));
           }
         }
         T *out_gamma = data_of<T>(ctx.outputs[1]), *out_beta = data_of<T>(ctx.outputs[2]);
         for (int64_t j = 0; j < features; ++j) {
           out_gamma[j] = from_double<T>(grad_gamma[static_cast<size_t>(j)]);
           out_beta[j] = from_double<T>(grad_beta[static_cast<size_t>(j)]);
         }
       });
     }});

const OpSchema& kLayerNorm = define_op({
    .name = "layer_norm",
    .summary = "(x - mean) / sqrt(var + eps) * gamma + beta over the last axis; also returns mean and rstd per row",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,  // normalization statistics
    .num_inputs = 3,
    .infer =
        [](const InferContext& ctx) {
          const int64_t features = check_layer_norm_input(ctx, 0);
          const Shape& x = ctx.inputs[0].shape;
          if (ctx.attrs.get_float("epsilon") < 0) {
            ctx.fail(fmt::format("epsilon is {}, it must not be negative", ctx.attrs.get_float("epsilon")));
          }
          expect_feature_vector(ctx, 1, "gamma", features, x);
          expect_feature_vector(ctx, 2, "beta", features, x);
          const DType dtype = ctx.inputs[0].dtype;
          return std::vector<TensorSpec>{{x, dtype}, {row_shape(x), dtype}, {row_shape(x), dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& x = ctx.inputs[0];
          const Tensor &mean = ctx.outputs[1], &rstd = ctx.outputs[2];
          std::vector<Tensor> grads =
              call_op(kLayerNormBackward, {ctx.grad_output(0), x, ctx.inputs[1], mean, rstd}, Attrs{});
          // The statistics are functions of x too: d mean / dx = 1 / D, d rstd / dx = -rstd^3 (x - mean) / D.
          const Tensor features = scalar_like(x, static_cast<double>(x.dim(-1)));
          if (ctx.grad_outputs[1].defined()) {
            grads[0] = add(grads[0], expand_dims(div(ctx.grad_outputs[1], features), -1));
          }
          if (ctx.grad_outputs[2].defined()) {
            const Tensor scale = div(mul(neg(ctx.grad_outputs[2]), mul(rstd, square(rstd))), features);
            grads[0] = add(grads[0], mul(sub(x, expand_dims(mean, -1)), expand_dims(scale, -1)));
          }
          return grads;
        },
});

// x (R, D), gamma, beta (D) -> y (R, D), mean, rstd (R); two passes in double.
const bool kLayerNormReference = register_kernel(
    "layer_norm",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const int64_t features = ctx.inputs[0].dim(-1);
       const int64_t rows = features == 0 ? 0 : ctx.inputs[0].numel() / features;
       const double epsilon = ctx.attrs.get_float("epsilon");
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         const T *x = data_of<T>(ctx.inputs[0]), *gamma = data_of<T>(ctx.inputs[1]), *beta = data_of<T>(ctx.inputs[2]);
         T *y = data_of<T>(ctx.outputs[0]), *mean = data_of<T>(ctx.outputs[1]), *rstd = data_of<T>(ctx.outputs[2]);
         for (int64_t r = 0; r < rows; ++r) {
           const T* row = x + r * features;
           double total = 0, squares = 0;
           for (int64_t j = 0; j < features; ++j) total += to_double(row[j]);
           const double mu = total / static_cast<double>(features);
           for (int64_t j = 0; j < features; ++j) squares += (to_double(row[j]) - mu) * (to_double(row[j]) - mu);
           const double rs = 1 / std::sqrt(squares / static_cast<double>(features) + epsilon);
           for (int64_t j = 0; j < features; ++j) {
             y[r * features + j] =
                 from_double<T>((to_double(row[j]) - mu) * rs * to_double(gamma[j]) + to_double(beta[j]));
           }
           mean[r] = from_double<T>(mu);
           rstd[r] = from_double<T>(rs);
         }
       });
     }});

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                       double epsilon, const std::string& data_format) {
  std::vector<Tensor> out = call_op(kBatchNormTraining, {x, gamma, beta}, norm_attrs(epsilon, data_format));
  return {out[0], out[1], out[2]};
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                            const Tensor& variance, double epsilon, const std::string& data_format) {
  return call_op1(kBatchNormInference, {x, gamma, beta, mean, variance}, norm_attrs(epsilon, data_format));
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                                       const std::string& data_format) {
  std::vector<Tensor> out =
      call_op(kBatchNormBackward, {grad_y, x, gamma, mean, variance}, norm_attrs(epsilon, data_format));
  return {out[0], out[1], out[2]};
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon) {
  return call_op(kLayerNorm, {x, gamma, beta}, Attrs{{"epsilon", epsilon}})[0];
}

}  // namespace nimbus
