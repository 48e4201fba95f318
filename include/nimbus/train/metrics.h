// Metrics: running statistics over an epoch, with Keras's names.
//
//   auto accuracy = train::SparseCategoricalAccuracy();
//   accuracy->update_state(labels, logits);   // eagerly, batch by batch
//   accuracy->result();                       // fraction correct so far
//   accuracy->reset_state();
//
// A metric splits into a traceable part and a host part: batch_statistics()
// computes a batch's sufficient statistics with ops (counts of correct
// predictions, of true positives per threshold, ...), so the trainer computes
// them inside its traced step; accumulate() adds them up on the host, and
// result() turns the totals into the value. Statistics are sums, so the
// result over an epoch is exact however the epoch is batched.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nimbus/tensor/tensor.h"
#include "nimbus/train/losses.h"

namespace nimbus::train {

class Metric {
 public:
  explicit Metric(std::string name) : name_(std::move(name)) {}
  virtual ~Metric() = default;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // A batch's statistics, each a tensor (computed with ops: traceable).
  virtual std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const = 0;
  // Adds statistics computed by batch_statistics (reads their values).
  void accumulate(const std::vector<Tensor>& statistics);
  void update_state(const Tensor& y_true, const Tensor& y_pred) { accumulate(batch_statistics(y_true, y_pred)); }
  // The value over everything accumulated since the last reset (0 before any update).
  virtual double result() const = 0;
  void reset_state() { totals_.clear(); }
  // The totals so far, for checkpoints taken in the middle of an epoch.
  const std::vector<std::vector<double>>& totals() const { return totals_; }
  void set_totals(std::vector<std::vector<double>> totals) { totals_ = std::move(totals); }

 protected:
  // Totals, one vector per statistic; empty before the first update.
  std::vector<std::vector<double>> totals_;

 private:
  std::string name_;
};

// Keras's Accuracy: fraction of elements where y_pred equals y_true (compared in y_pred's dtype).
std::shared_ptr<Metric> Accuracy(const std::string& name = "accuracy");
// The accuracies and top-k count one prediction per row of scores: per sample for (N, C), per token
// for a language model's (N, T, C) logits with (N, T) ids.
// Fraction of predictions whose argmax equals the class id.
std::shared_ptr<Metric> SparseCategoricalAccuracy(const std::string& name = "sparse_categorical_accuracy");
// Fraction whose argmax equals the one-hot target's argmax.
std::shared_ptr<Metric> CategoricalAccuracy(const std::string& name = "categorical_accuracy");
// Fraction with (y_pred > threshold) == (y_true > 0.5), over every element.
std::shared_ptr<Metric> BinaryAccuracy(double threshold = 0.5, const std::string& name = "binary_accuracy");
// Fraction whose class id scores among the k highest (ties count as in).
std::shared_ptr<Metric> SparseTopKCategoricalAccuracy(int64_t k = 5,
                                                      const std::string& name = "sparse_top_k_categorical_accuracy");
// Binary: tp / (tp + fp) and tp / (tp + fn) with predictions thresholded at `threshold`.
std::shared_ptr<Metric> Precision(double threshold = 0.5, const std::string& name = "precision");
std::shared_ptr<Metric> Recall(double threshold = 0.5, const std::string& name = "recall");
// Area under the ROC curve, from confusion counts at num_thresholds thresholds evenly spaced in [0, 1]
// (the end ones nudged by 1e-7 to include 0 and 1), by the trapezoidal rule, as Keras's AUC.
std::shared_ptr<Metric> AUC(int num_thresholds = 200, const std::string& name = "auc");
// Weighted mean of values (the trainer's "loss").
std::shared_ptr<Metric> Mean(const std::string& name = "mean");
// exp(total loss / total predictions) over the epoch, `loss` per token (or per sample): a language
// model's perplexity when `loss` is its sparse cross-entropy. Exact however the epoch is batched
// (not the mean of per-batch exps).
std::shared_ptr<Metric> Perplexity(const Loss& loss, const std::string& name = "perplexity");

// By Keras name. "accuracy" and "acc" pick the accuracy that fits `loss`
// (sparse categorical, categorical or binary) and keep the name "accuracy";
// "top_k" / "sparse_top_k_categorical_accuracy" use k = 5; "perplexity" exponentiates `loss`.
std::shared_ptr<Metric> get_metric(const std::string& name, const Loss& loss);

}  // namespace nimbus::train
