// Losses with Keras's names and semantics: each maps (y_true, y_pred) to one
// value per sample; the trainer averages over the batch (Keras's
// "sum_over_batch_size" reduction) and adds the layers' regularization.
//
//   train::Loss loss = train::SparseCategoricalCrossentropy({.from_logits = true});
//   Tensor per_sample = loss.per_sample(labels, logits);   // (N)
//   Tensor value = loss(labels, logits);                   // mean over the batch
//
// Definitions (C classes, eps = 1e-7 clipping for probabilities as in Keras):
//   sparse_categorical_crossentropy: -log p[label]; with label_smoothing s the target is
//       (1 - s) one_hot(label) + s / C, as categorical_crossentropy smooths
//   categorical_crossentropy: -sum_c y_c log p_c, y smoothed to (1 - s) y + s / C
//   binary_crossentropy: mean over the last axis of -(y log p + (1 - y) log(1 - p)), y smoothed to
//       y (1 - s) + s / 2
//   mean_squared_error: mean over the last axis of (y - p)^2; mean_absolute_error: of |y - p|
// With from_logits, p is softmax(logits) (sigmoid for binary), computed stably.
#pragma once

#include <functional>
#include <string>

#include "nimbus/tensor/tensor.h"

namespace nimbus::train {

class Loss {
 public:
  using PerSample = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;
  Loss() = default;  // undefined: compile() refuses it
  Loss(std::string name, PerSample per_sample) : name_(std::move(name)), per_sample_(std::move(per_sample)) {}

  const std::string& name() const { return name_; }
  bool defined() const { return per_sample_ != nullptr; }
  Tensor per_sample(const Tensor& y_true, const Tensor& y_pred) const { return per_sample_(y_true, y_pred); }
  // Mean over the batch.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const;

 private:
  std::string name_;
  PerSample per_sample_;
};

struct CrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0;
};
Loss SparseCategoricalCrossentropy(const CrossentropyOptions& options = {});
Loss CategoricalCrossentropy(const CrossentropyOptions& options = {});
Loss BinaryCrossentropy(const CrossentropyOptions& options = {});
Loss MeanSquaredError();
Loss MeanAbsoluteError();
// Mean over the last axis of 0.5 e^2 where |e| <= delta, else delta (|e| - 0.5 delta); e = y - p.
Loss Huber(double delta = 1.0);

// By Keras name (sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy,
// mse / mean_squared_error, mae / mean_absolute_error, huber), from_logits as given.
Loss get_loss(const std::string& name, bool from_logits = false);

}  // namespace nimbus::train
