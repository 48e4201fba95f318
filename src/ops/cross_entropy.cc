// Softmax cross-entropy, fused and stable: sparse (class ids) and dense
// (probabilities). Logits (..., C); one loss per example (...).
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

// log(sum(exp(row))) with the maximum subtracted first.
template <typename T>
double row_logsumexp(const T* row, int64_t classes) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < classes; ++c) max_value = std::max(max_value, to_double(row[c]));
  double total = 0;
  for (int64_t c = 0; c < classes; ++c) total += std::exp(to_double(row[c]) - max_value);
  return max_value + std::log(total);
}

std::vector<TensorSpec> infer_per_example(const InferContext& ctx) {
  ctx.expect_floating(0);
  const Shape& logits = ctx.inputs[0].shape;
  if (logits.rank() < 1) ctx.fail("logits need a class axis, got a scalar");
  return {
      {Shape(std::span<const int64_t>(logits.begin(), static_cast<size_t>(logits.rank() - 1))), ctx.inputs[0].dtype}};
}

// Labels outside [0, classes) name the example and the remedy (the kernels check before computing).
void check_label(int64_t label, int64_t example, int64_t classes) {
  if (label < 0 || label >= classes) {
    throw InvalidArgument(fmt::format("sparse_softmax_cross_entropy: label {} of example {} is outside "
                                      "[0, {}) for logits with {} classes",
                                      label, example, classes, classes),
                          "labels are class ids from 0 to num_classes - 1");
  }
}

const OpSchema& kSparseBackward = define_op({
    .name = "sparse_softmax_cross_entropy_backward",
    .summary = "(softmax(logits) - one_hot(labels)) * grad_loss: the gradient of sparse_softmax_cross_entropy",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 3,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_floating(0);
          ctx.expect_dtype(1, {DType::kI32, DType::kI64, DType::kU8});
          ctx.expect_same_dtype(0, 2);
          const std::vector<TensorSpec> per_example = infer_per_example(ctx);
          for (size_t i = 1; i <= 2; ++i) {
            if (ctx.inputs[i].shape != per_example[0].shape) {
              ctx.fail(fmt::format("input {} has shape {}; logits {} need {}", i, ctx.inputs[i].shape.to_string(),
                                   ctx.inputs[0].shape.to_string(), per_example[0].shape.to_string()));
            }
          }
          return std::vector<TensorSpec>{ctx.inputs[0]};
        },
    .differentiable = false,
});

const bool kSparseBackwardReference = register_kernel(
    "sparse_softmax_cross_entropy_backward",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const Tensor& logits = ctx.inputs[0];
       const int64_t classes = logits.dim(-1);
       const int64_t rows = ctx.inputs[2].numel();
       visit_dtype(logits.dtype(), [&]<typename T>() {
         visit_dtype(ctx.inputs[1].dtype(), [&]<typename L>() {
           const T* pl = static_cast<const T*>(logits.raw_data());
           const L* plabel = static_cast<const L*>(ctx.inputs[1].raw_data());
           const T* pg = static_cast<const T*>(ctx.inputs[2].raw_data());
           T* po = static_cast<T*>(ctx.outputs[0].raw_data());
           for (int64_t r = 0; r < rows; ++r) {
             const int64_t label = static_cast<int64_t>(to_double(plabel[r]));
             check_label(label, r, classes);
             const T* row = pl + r * classes;
             const double lse = row_logsumexp(row, classes), g = to_double(pg[r]);
             for (int64_t c = 0; c < classes; ++c) {
               po[r * classes + c] = from_double<T>((std::exp(to_double(row[c]) - lse) - (c == label)) * g);
             }
           }
         });
       });
     }});

const OpSchema& kSparse = define_op({
    .name = "sparse_softmax_cross_entropy",
    .summary = "-log softmax(logits)[label] per example; labels are class ids",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_dtype(1, {DType::kI32, DType::kI64, DType::kU8});
          std::vector<TensorSpec> out = infer_per_example(ctx);
          if (ctx.inputs[1].shape != out[0].shape) {
            ctx.fail(fmt::format("labels have shape {}, logits {} need labels of shape {}",
                                 ctx.inputs[1].shape.to_string(), ctx.inputs[0].shape.to_string(),
                                 out[0].shape.to_string()));
          }
          return out;
        },
    .gradient =
        [](const GradContext& ctx) {
          // d loss / d logits = (softmax(logits) - one_hot(label)) * g, in one pass over the logits.
          return std::vector<Tensor>{call_op1(kSparseBackward, {ctx.inputs[0], ctx.inputs[1], ctx.grad_output(0)}),
                                     Tensor()};
        },
});

const bool kSparseReference = register_kernel(
    "sparse_softmax_cross_entropy",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const Tensor& logits = ctx.inputs[0];
       const Tensor& labels = ctx.inputs[1];
       const int64_t classes = logits.dim(-1);
       const int64_t rows = ctx.outputs[0].numel();
       visit_dtype(logits.dtype(), [&]<typename T>() {
         visit_dtype(labels.dtype(), [&]<typename L>() {
           const T* pl = static_cast<const T*>(logits.raw_data());
           const L* plabel = static_cast<const L*>(labels.raw_data());
           T* po = static_cast<T*>(ctx.outputs[0].raw_data());
           for (int64_t r = 0; r < rows; ++r) {
             const int64_t label = static_cast<int64_t>(to_double(plabel[r]));
             check_label(label, r, classes);
             const T* row = pl + r * classes;
             po[r] = from_double<T>(row_logsumexp(row, classes) - to_double(row[label]));
           }
         });
       });
     }});

const OpSchema& kDense = define_op({
    .name = "softmax_cross_entropy",
    .summary = "-sum(labels * log softmax(logits)) per example; labels are probabilities",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_same_dtype(0, 1);
          if (ctx.inputs[0].shape != ctx.inputs[1].shape) {
            ctx.fail(fmt::format("labels have shape {}, logits {}: they must match", ctx.inputs[1].shape.to_string(),
                                 ctx.inputs[0].shape.to_string()));
          }
          return infer_per_example(ctx);
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& logits = ctx.inputs[0];
          const Tensor& labels = ctx.inputs[1];
          const Tensor g = expand_dims(ctx.grad_output(0), -1);
          Tensor grad_logits, grad_labels;
          // d/dlogits = softmax(logits) * sum(labels) - labels; d/dlabels = -log_softmax(logits)
          if (ctx.needs(0)) grad_logits = mul(sub(mul(softmax(logits, -1), sum(labels, {-1}, true)), labels), g);
          if (ctx.needs(1)) grad_labels = mul(neg(log_softmax(logits, -1)), g);
          return std::vector<Tensor>{grad_logits, grad_labels};
        },
});

const bool kDenseReference = register_kernel(
    "softmax_cross_entropy",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const Tensor& logits = ctx.inputs[0];
       const int64_t classes = logits.dim(-1);
       const int64_t rows = ctx.outputs[0].numel();
       visit_dtype(logits.dtype(), [&]<typename T>() {
         const T* pl = static_cast<const T*>(logits.raw_data());
         const T* py = static_cast<const T*>(ctx.inputs[1].raw_data());
         T* po = static_cast<T*>(ctx.outputs[0].raw_data());
         for (int64_t r = 0; r < rows; ++r) {
           const T* row = pl + r * classes;
           const double lse = row_logsumexp(row, classes);
           double loss = 0;
           for (int64_t c = 0; c < classes; ++c) {
             loss -= to_double(py[r * classes + c]) * (to_double(row[c]) - lse);
           }
           po[r] = from_double<T>(loss);
         }
       });
     }});

}  // namespace

Tensor sparse_softmax_cross_entropy(const Tensor& logits, const Tensor& labels) {
  return call_op1(kSparse, {logits, labels});
}
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels) { return call_op1(kDense, {logits, labels}); }

}  // namespace nimbus
