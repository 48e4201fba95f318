#include "batch_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "nimbus/base/error.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus::train {

TensorBatches::TensorBatches(const Tensor& x, const Tensor& y, int64_t batch_size, bool shuffle)
    : x_(x), y_(y), batch_size_(batch_size), shuffle_(shuffle), order_(static_cast<size_t>(x.dim(0))) {}

int64_t TensorBatches::batches_per_epoch() const { return (x_.dim(0) + batch_size_ - 1) / batch_size_; }

void TensorBatches::begin_epoch(int epoch, uint64_t seed, int64_t first_step) {
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) {
    std::seed_seq seq{seed, static_cast<uint64_t>(epoch)};
    std::mt19937_64 rng(seq);
    std::shuffle(order_.begin(), order_.end(), rng);
  }
  next_step_ = first_step;
}

std::optional<std::pair<Tensor, Tensor>> TensorBatches::next() {
  const auto samples = static_cast<int64_t>(order_.size());
  const int64_t begin = next_step_ * batch_size_;
  if (begin >= samples) return std::nullopt;
  ++next_step_;
  const int64_t end = std::min(samples, begin + batch_size_);
  const Tensor indices =
      Tensor::from_vector(std::vector<int64_t>(order_.begin() + begin, order_.begin() + end), Shape({end - begin}));
  return std::pair{gather(x_, indices), gather(y_, indices)};
}

DatasetBatches::DatasetBatches(const data::Dataset& dataset, std::string resume_position)
    : dataset_(dataset), resume_position_(std::move(resume_position)) {}

int64_t DatasetBatches::batches_per_epoch() const {
  const int64_t cardinality = dataset_.cardinality();
  if (cardinality == data::kInfiniteCardinality) {
    throw InvalidArgument("fit: the dataset is infinite (repeat() without a count)",
                          "give steps_per_epoch, or leave repeat out: each epoch iterates the dataset once");
  }
  return cardinality >= 0 ? cardinality : -1;
}

void DatasetBatches::begin_epoch(int epoch, uint64_t seed, int64_t first_step) {
  iterator_.reset();  // the last epoch's threads stop before the next epoch's start
  if (first_step > 0 && !resume_position_.empty()) {
    iterator_.emplace(data::Iterator::restore(dataset_, resume_position_));
  } else {
    iterator_.emplace(dataset_.iterator(seed, static_cast<uint64_t>(epoch - 1)));
    for (int64_t step = 0; step < first_step; ++step) {
      if (!iterator_->next()) break;
    }
  }
  resume_position_.clear();
}

std::optional<std::pair<Tensor, Tensor>> DatasetBatches::next() {
  std::optional<data::Element> element = iterator_->next();
  if (!element) return std::nullopt;
  if (element->size() != 2 || element->at(0).rank() < 1 || element->at(1).rank() < 1 ||
      element->at(0).dim(0) != element->at(1).dim(0)) {
    throw InvalidArgument(
        fmt::format("fit: the dataset's elements must be (x, y) batches with one row per sample, "
                    "got {} components{}",
                    element->size(),
                    element->size() == 2 ? fmt::format(" shaped {} and {}", element->at(0).shape().to_string(),
                                                       element->at(1).shape().to_string())
                                         : ""),
        "end the pipeline with batch() over (x, y) elements");
  }
  return std::pair{std::move(element->at(0)), std::move(element->at(1))};
}

std::string DatasetBatches::position() const {
  if (!iterator_ || !saveable_) return {};
  try {
    return iterator_->save();
  } catch (const InvalidArgument&) {
    // A non-deterministic map: a resume replays the epoch's first steps instead, in another order.
    saveable_ = false;
    return {};
  }
}

std::string DatasetBatches::stats_json() const { return iterator_ ? iterator_->stats_json() : std::string(); }

}  // namespace nimbus::train
