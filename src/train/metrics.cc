#include "nimbus/train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus::train {

namespace {

Tensor count_true(const Tensor& condition) { return sum(cast(condition, DType::kF32)); }
// How many predictions y_pred holds: one per sample for (N, C) scores, one per token for (N, T, C).
Tensor predictions_in(const Tensor& y_pred) {
  return Tensor::scalar<float>(static_cast<float>(y_pred.numel() / std::max<int64_t>(y_pred.dim(-1), 1)));
}

Tensor labels_as_ids(const Tensor& y_true, const Tensor& y_pred) {
  Tensor ids = y_true;
  if (ids.rank() == y_pred.rank() && ids.dim(-1) == 1) ids = squeeze(ids, {-1});
  return cast(ids, DType::kI64);
}

double ratio(double num, double den) { return den == 0 ? 0 : num / den; }

// Metrics whose statistics are {numerator, denominator}.
class RatioMetric : public Metric {
 public:
  using Metric::Metric;
  double result() const override { return totals_.empty() ? 0 : ratio(totals_[0][0], totals_[1][0]); }
};

class AccuracyMetric : public RatioMetric {
 public:
  using RatioMetric::RatioMetric;
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    return {count_true(equal(reshape(cast(y_true, y_pred.dtype()), y_pred.shape()), y_pred)),
            Tensor::scalar<float>(static_cast<float>(y_pred.numel()))};
  }
};

class SparseCategoricalAccuracyMetric : public RatioMetric {
 public:
  using RatioMetric::RatioMetric;
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    return {count_true(equal(argmax(y_pred, -1), labels_as_ids(y_true, y_pred))), predictions_in(y_pred)};
  }
};

class CategoricalAccuracyMetric : public RatioMetric {
 public:
  using RatioMetric::RatioMetric;
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    return {count_true(equal(argmax(y_pred, -1), argmax(y_true, -1))), predictions_in(y_pred)};
  }
};

class BinaryAccuracyMetric : public RatioMetric {
 public:
  BinaryAccuracyMetric(double threshold, std::string name) : RatioMetric(std::move(name)), threshold_(threshold) {}
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    const Tensor predicted = greater(y_pred, scalar_like(y_pred, threshold_));
    const Tensor truth = greater(cast(y_true, y_pred.dtype()), scalar_like(y_pred, 0.5));
    return {count_true(equal(predicted, reshape(truth, y_pred.shape()))),
            Tensor::scalar<float>(static_cast<float>(y_pred.numel()))};
  }

 private:
  double threshold_;
};

class TopKMetric : public RatioMetric {
 public:
  TopKMetric(int64_t k, std::string name) : RatioMetric(std::move(name)), k_(k) {
    if (k <= 0) throw InvalidArgument(fmt::format("{}: k must be positive, got {}", this->name(), k));
  }
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    const int64_t classes = y_pred.dim(-1);
    const int64_t k = std::min(k_, classes);
    // One row per prediction: (N, C), or (N T, C) for per-token scores.
    const Tensor scores = reshape(y_pred, std::vector<int64_t>{-1, classes});
    const Tensor ids = reshape(labels_as_ids(y_true, y_pred), std::vector<int64_t>{-1});
    const Tensor kth = slice(top_k(scores, k).first, {0, k - 1}, {-1, 1});  // (M, 1)
    const Tensor label_score = sum(one_hot(ids, classes, scores.dtype()) * scores, {-1}, true);
    return {count_true(greater_equal(label_score, kth)), predictions_in(y_pred)};
  }

 private:
  int64_t k_;
};

// Statistics {true positives, predicted positives or actual positives}.
class PrecisionRecallMetric : public RatioMetric {
 public:
  PrecisionRecallMetric(bool precision, double threshold, std::string name)
      : RatioMetric(std::move(name)), precision_(precision), threshold_(threshold) {}
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    const Tensor predicted = greater(y_pred, scalar_like(y_pred, threshold_));
    const Tensor truth = reshape(greater(cast(y_true, y_pred.dtype()), scalar_like(y_pred, 0.5)), y_pred.shape());
    return {count_true(logical_and(predicted, truth)), count_true(precision_ ? predicted : truth)};
  }

 private:
  bool precision_;
  double threshold_;
};

class AUCMetric : public Metric {
 public:
  AUCMetric(int num_thresholds, std::string name) : Metric(std::move(name)), num_thresholds_(num_thresholds) {
    if (num_thresholds < 2) throw InvalidArgument(fmt::format("{}: num_thresholds must be >= 2", this->name()));
    std::vector<float> thresholds(static_cast<size_t>(num_thresholds));
    for (int i = 0; i < num_thresholds; ++i) thresholds[i] = static_cast<float>(i) / float(num_thresholds - 1);
    thresholds.front() = -1e-7f;
    thresholds.back() = 1 + 1e-7f;
    thresholds_ = Tensor::from_vector<float>(thresholds, {1, num_thresholds});
  }
  // {true positives per threshold (T), false positives per threshold (T), positives, negatives}
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    const Tensor scores = reshape(cast(y_pred, DType::kF32), std::vector<int64_t>{-1, 1});
    const Tensor truth =
        cast(greater(reshape(cast(y_true, DType::kF32), std::vector<int64_t>{-1, 1}), scalar_like(scores, 0.5)),
             DType::kF32);
    const Tensor above = cast(greater(scores, thresholds_), DType::kF32);  // (N, T)
    const Tensor positives = sum(truth);
    return {sum(above * truth, {0}), sum(above * (1.0 - truth), {0}), positives,
            Tensor::scalar<float>(static_cast<float>(scores.dim(0))) - positives};
  }
  double result() const override {
    if (totals_.empty()) return 0;
    const double positives = totals_[2][0], negatives = totals_[3][0];
    double area = 0;
    for (int i = 0; i + 1 < num_thresholds_; ++i) {
      const double tpr_a = ratio(totals_[0][i], positives), tpr_b = ratio(totals_[0][i + 1], positives);
      const double fpr_a = ratio(totals_[1][i], negatives), fpr_b = ratio(totals_[1][i + 1], negatives);
      area += (fpr_a - fpr_b) * (tpr_a + tpr_b) / 2;
    }
    return area;
  }

 private:
  int num_thresholds_;
  Tensor thresholds_;
};

// Statistics {sum of the loss over every prediction, how many}; the result is exp of their ratio.
class PerplexityMetric : public Metric {
 public:
  PerplexityMetric(Loss loss, std::string name) : Metric(std::move(name)), loss_(std::move(loss)) {
    if (!loss_.defined()) throw InvalidArgument(fmt::format("{}: needs the loss it exponentiates", this->name()));
  }
  std::vector<Tensor> batch_statistics(const Tensor& y_true, const Tensor& y_pred) const override {
    const Tensor losses = loss_.per_sample(y_true, y_pred);  // one per token for (N, T) targets
    return {sum(cast(losses, DType::kF32)), Tensor::scalar<float>(static_cast<float>(losses.numel()))};
  }
  double result() const override { return totals_.empty() ? 0 : std::exp(ratio(totals_[0][0], totals_[1][0])); }

 private:
  Loss loss_;
};

class MeanMetric : public RatioMetric {
 public:
  using RatioMetric::RatioMetric;
  // y_true: the values' weights (sample counts); y_pred: the values (weighted by them).
  std::vector<Tensor> batch_statistics(const Tensor& weight, const Tensor& value) const override {
    return {sum(cast(value, DType::kF32) * cast(weight, DType::kF32)), sum(cast(weight, DType::kF32))};
  }
};

}  // namespace

void Metric::accumulate(const std::vector<Tensor>& statistics) {
  if (totals_.empty()) totals_.resize(statistics.size());
  NIMBUS_ASSERT(totals_.size() == statistics.size()) << name_ << ": statistics changed count";
  for (size_t i = 0; i < statistics.size(); ++i) {
    const std::vector<double> values = statistics[i].to_vector<double>();
    if (totals_[i].empty()) totals_[i].assign(values.size(), 0.0);
    NIMBUS_ASSERT(totals_[i].size() == values.size()) << name_ << ": statistic " << i << " changed size";
    for (size_t j = 0; j < values.size(); ++j) totals_[i][j] += values[j];
  }
}

std::shared_ptr<Metric> SparseCategoricalAccuracy(const std::string& name) {
  return std::make_shared<SparseCategoricalAccuracyMetric>(name);
}
std::shared_ptr<Metric> CategoricalAccuracy(const std::string& name) {
  return std::make_shared<CategoricalAccuracyMetric>(name);
}
std::shared_ptr<Metric> BinaryAccuracy(double threshold, const std::string& name) {
  return std::make_shared<BinaryAccuracyMetric>(threshold, name);
}
std::shared_ptr<Metric> SparseTopKCategoricalAccuracy(int64_t k, const std::string& name) {
  return std::make_shared<TopKMetric>(k, name);
}
std::shared_ptr<Metric> Precision(double threshold, const std::string& name) {
  return std::make_shared<PrecisionRecallMetric>(true, threshold, name);
}
std::shared_ptr<Metric> Recall(double threshold, const std::string& name) {
  return std::make_shared<PrecisionRecallMetric>(false, threshold, name);
}
std::shared_ptr<Metric> AUC(int num_thresholds, const std::string& name) {
  return std::make_shared<AUCMetric>(num_thresholds, name);
}
std::shared_ptr<Metric> Accuracy(const std::string& name) { return std::make_shared<AccuracyMetric>(name); }
std::shared_ptr<Metric> Mean(const std::string& name) { return std::make_shared<MeanMetric>(name); }
std::shared_ptr<Metric> Perplexity(const Loss& loss, const std::string& name) {
  return std::make_shared<PerplexityMetric>(loss, name);
}

std::shared_ptr<Metric> get_metric(const std::string& name, const Loss& loss) {
  const std::string& loss_name = loss.name();
  if (name == "perplexity") return Perplexity(loss);
  if (name == "accuracy" || name == "acc") {
    if (loss_name == "sparse_categorical_crossentropy") return SparseCategoricalAccuracy("accuracy");
    if (loss_name == "categorical_crossentropy") return CategoricalAccuracy("accuracy");
    return BinaryAccuracy(0.5, "accuracy");
  }
  if (name == "sparse_categorical_accuracy") return SparseCategoricalAccuracy();
  if (name == "categorical_accuracy") return CategoricalAccuracy();
  if (name == "binary_accuracy") return BinaryAccuracy();
  if (name == "top_k" || name == "sparse_top_k_categorical_accuracy") return SparseTopKCategoricalAccuracy(5);
  if (name == "precision") return Precision();
  if (name == "recall") return Recall();
  if (name == "auc" || name == "AUC") return AUC();
  throw InvalidArgument(fmt::format("unknown metric '{}'", name),
                        "use one of accuracy, sparse_categorical_accuracy, categorical_accuracy, binary_accuracy, "
                        "top_k, precision, recall, auc, perplexity");
}

}  // namespace nimbus::train
