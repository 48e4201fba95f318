#include "nimbus/train/losses.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus::train {

namespace {
constexpr double kEpsilon = 1e-7;  // Keras's backend epsilon

// Class ids as (N...) integers: a trailing axis of 1 is dropped, floats are cast.
Tensor class_ids(const Tensor& y_true, const Tensor& y_pred, const char* loss) {
  Tensor ids = y_true;
  if (ids.rank() == y_pred.rank() && ids.rank() > 0 && ids.dim(-1) == 1) ids = squeeze(ids, {-1});
  if (ids.rank() != y_pred.rank() - 1) {
    throw InvalidArgument(fmt::format("{}: labels of shape {} do not match predictions of shape {}", loss,
                                      y_true.shape().to_string(), y_pred.shape().to_string()),
                          "labels are class ids, one per sample (N), for predictions (N, classes)");
  }
  return is_floating(ids.dtype()) ? cast(ids, DType::kI64) : ids;
}

Tensor matching(const Tensor& y_true, const Tensor& y_pred, const char* loss) {
  if (y_true.shape() != y_pred.shape()) {
    throw InvalidArgument(fmt::format("{}: targets of shape {} do not match predictions of shape {}", loss,
                                      y_true.shape().to_string(), y_pred.shape().to_string()));
  }
  return y_true.dtype() == y_pred.dtype() ? y_true : cast(y_true, y_pred.dtype());
}

// -sum_c y_c log p_c over the last axis, with p = softmax(logits) or the given probabilities.
Tensor categorical(const Tensor& y, const Tensor& y_pred, bool from_logits) {
  if (from_logits) {
    if (y_pred.rank() == 2) return softmax_cross_entropy(y_pred, y);
    return -sum(y * log_softmax(y_pred, -1), {-1});
  }
  const Tensor p = clip(y_pred / sum(y_pred, {-1}, true), kEpsilon, 1 - kEpsilon);
  return -sum(y * log(p), {-1});
}

void check_smoothing(double label_smoothing, const char* loss) {
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
    throw InvalidArgument(fmt::format("{}: label_smoothing must be in [0, 1], got {}", loss, label_smoothing));
  }
}
}  // namespace

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred) const { return mean(per_sample(y_true, y_pred)); }

Loss SparseCategoricalCrossentropy(const CrossentropyOptions& options) {
  check_smoothing(options.label_smoothing, "sparse_categorical_crossentropy");
  return Loss("sparse_categorical_crossentropy", [options](const Tensor& y_true, const Tensor& y_pred) {
    const Tensor ids = class_ids(y_true, y_pred, "sparse_categorical_crossentropy");
    const double s = options.label_smoothing;
    if (options.from_logits && y_pred.rank() >= 2) {
      Tensor hard = sparse_softmax_cross_entropy(y_pred, ids);
      if (s == 0) return hard;
      // (1 - s) CE(label) + s / C * sum_c -log p_c
      const Tensor uniform = -mean(log_softmax(y_pred, -1), {-1});
      return hard * (1 - s) + uniform * s;
    }
    const int64_t classes = y_pred.dim(-1);
    Tensor target = one_hot(ids, classes, y_pred.dtype());
    if (s != 0) target = target * (1 - s) + s / double(classes);
    return categorical(target, y_pred, options.from_logits);
  });
}

Loss CategoricalCrossentropy(const CrossentropyOptions& options) {
  check_smoothing(options.label_smoothing, "categorical_crossentropy");
  return Loss("categorical_crossentropy", [options](const Tensor& y_true, const Tensor& y_pred) {
    const double s = options.label_smoothing;
    const Tensor target = matching(y_true, y_pred, "categorical_crossentropy");
    return categorical(s == 0 ? target : target * (1 - s) + s / double(y_pred.dim(-1)), y_pred, options.from_logits);
  });
}

Loss BinaryCrossentropy(const CrossentropyOptions& options) {
  check_smoothing(options.label_smoothing, "binary_crossentropy");
  return Loss("binary_crossentropy", [options](const Tensor& y_true, const Tensor& y_pred) {
    Tensor z = matching(y_true, y_pred, "binary_crossentropy");
    const double s = options.label_smoothing;
    if (s != 0) z = z * (1 - s) + s / 2;
    Tensor elementwise;
    if (options.from_logits) {
      elementwise = softplus(y_pred) - y_pred * z;  // = max(x, 0) - x z + log(1 + e^-|x|)
    } else {
      const Tensor p = clip(y_pred, kEpsilon, 1 - kEpsilon);
      elementwise = -(z * log(p) + (1.0 - z) * log(1.0 - p));
    }
    return y_pred.rank() <= 1 ? elementwise : mean(elementwise, {-1});
  });
}

Loss MeanSquaredError() {
  return Loss("mean_squared_error", [](const Tensor& y_true, const Tensor& y_pred) {
    const Tensor diff = square(matching(y_true, y_pred, "mean_squared_error") - y_pred);
    return y_pred.rank() <= 1 ? diff : mean(diff, {-1});
  });
}

Loss MeanAbsoluteError() {
  return Loss("mean_absolute_error", [](const Tensor& y_true, const Tensor& y_pred) {
    const Tensor diff = abs(matching(y_true, y_pred, "mean_absolute_error") - y_pred);
    return y_pred.rank() <= 1 ? diff : mean(diff, {-1});
  });
}

Loss Huber(double delta) {
  if (!(delta > 0)) throw InvalidArgument(fmt::format("huber: delta must be > 0, got {}", delta));
  return Loss("huber", [delta](const Tensor& y_true, const Tensor& y_pred) {
    const Tensor error = abs(matching(y_true, y_pred, "huber") - y_pred);
    const Tensor quadratic = minimum(error, scalar_like(error, delta));
    // 0.5 q^2 + delta (|e| - q): the quadratic part up to delta, linear beyond.
    const Tensor elementwise = square(quadratic) * 0.5 + (error - quadratic) * delta;
    return y_pred.rank() <= 1 ? elementwise : mean(elementwise, {-1});
  });
}

Loss get_loss(const std::string& name, bool from_logits) {
  if (name == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy({.from_logits = from_logits});
  if (name == "categorical_crossentropy") return CategoricalCrossentropy({.from_logits = from_logits});
  if (name == "binary_crossentropy") return BinaryCrossentropy({.from_logits = from_logits});
  if (name == "mse" || name == "mean_squared_error") return MeanSquaredError();
  if (name == "mae" || name == "mean_absolute_error") return MeanAbsoluteError();
  if (name == "huber" || name == "huber_loss") return Huber();
  throw InvalidArgument(fmt::format("unknown loss '{}'", name),
                        "use one of sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, "
                        "mse, mae, huber");
}

}  // namespace nimbus::train
