// batch, padded_batch and unbatch.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

// Copies `src` into the leading corner of `dst` (same rank, dst at least as
// large on every axis), row-major.
void copy_into_corner(const Tensor& src, char* dst, const Shape& dst_shape) {
  const size_t item = dtype_size(src.dtype());
  const int rank = src.rank();
  if (rank == 0) {
    std::memcpy(dst, src.raw_data(), item);
    return;
  }
  const int64_t row = src.dim(rank - 1);
  const int64_t rows = row == 0 ? 0 : src.numel() / row;
  const auto dst_strides = dst_shape.strides();
  const char* from = static_cast<const char*>(src.raw_data());
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    for (int d = 0; d < rank - 1; ++d) offset += index[static_cast<size_t>(d)] * dst_strides[static_cast<size_t>(d)];
    std::memcpy(dst + static_cast<size_t>(offset) * item, from + static_cast<size_t>(r * row) * item,
                static_cast<size_t>(row) * item);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < src.dim(d)) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
}

void fill_value(Tensor& t, double value) {
  visit_dtype(t.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(t.raw_data());
    const T v = from_double<T>(value);
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  });
}

void check_components(const Element& first, const Element& element) {
  if (element.size() != first.size()) {
    throw InvalidArgument(fmt::format("batch: elements have different numbers of components: {} and {}",
                                      element_signature(first), element_signature(element)));
  }
}

// The rows of one batch, each element copied into place as it arrives: the
// copy reads it while it is still in cache, and its buffer goes back to the
// host allocator at once, still in cache for the element made next (instead
// of a batch's worth of elements piling up before one copy of them all).
// Rows a parallel map already placed (BatchSlots) are not copied at all.
class BatchRows {
 public:
  BatchRows(int64_t batch_size, std::shared_ptr<BatchSlots> slots)
      : batch_size_(batch_size), slots_(std::move(slots)) {}

  int64_t count() const { return count_; }

  // Copies `element` in as the next row; an element unlike the batch's first
  // (components, shape or dtype) is refused and the batch restarts after it.
  void add(const Element& element) {
    if (count_ == 0) first_ = element;
    try {
      check_components(first_, element);
      for (size_t c = 0; c < element.size(); ++c) check_like_first(first_[c], element[c], count_);
    } catch (...) {
      reset();
      throw;
    }
    if (count_ == 0 && slots_) {
      columns_ = slots_->buffers_starting_with(element);
      capacity_ = columns_.empty() ? 0 : batch_size_;
    }
    if (count_ == capacity_) grow();
    for (size_t c = 0; c < element.size(); ++c) {
      const size_t row_bytes = element[c].nbytes();
      char* row = static_cast<char*>(columns_[c].raw_data()) + static_cast<size_t>(count_) * row_bytes;
      if (row_bytes > 0 && row != element[c].raw_data()) std::memcpy(row, element[c].raw_data(), row_bytes);
    }
    ++count_;
  }

  // The rows added since the last take, as views of their first `count` rows; starts the next batch.
  Element take() {
    Element out;
    for (Tensor& column : columns_) {
      Shape shape = column.shape();
      shape[0] = count_;
      const auto& impl = *column.impl_ptr();
      out.push_back(Tensor::view(impl.storage, impl.offset, shape, column.dtype()));
    }
    reset();
    return out;
  }

 private:
  static void check_like_first(const Tensor& first, const Tensor& part, int64_t index) {
    if (part.shape() != first.shape() || part.dtype() != first.dtype()) {
      throw InvalidArgument(
          fmt::format("batch: cannot stack {} {} with {} {} (element {} of the batch)", dtype_name(first.dtype()),
                      first.shape().to_string(), dtype_name(part.dtype()), part.shape().to_string(), index),
          "use padded_batch for elements of different shapes");
    }
  }

  void reset() {
    columns_.clear();
    first_.clear();
    count_ = capacity_ = 0;
  }

  void grow() {
    int64_t row_bytes = 0;
    for (const Tensor& t : first_) row_bytes += static_cast<int64_t>(t.nbytes());
    const int64_t upfront = std::max<int64_t>(1, kBatchUpfrontBytes / std::max<int64_t>(1, row_bytes));
    const int64_t capacity = std::min(batch_size_, capacity_ == 0 ? upfront : 2 * capacity_);
    for (size_t c = 0; c < first_.size(); ++c) {
      Shape shape{capacity};
      for (int64_t d : first_[c].shape().dims()) shape.push_back(d);
      Tensor column = host_tensor(shape, first_[c].dtype());
      if (c < columns_.size()) {
        std::memcpy(column.raw_data(), columns_[c].raw_data(), static_cast<size_t>(count_) * first_[c].nbytes());
        columns_[c] = std::move(column);
      } else {
        columns_.push_back(std::move(column));
      }
    }
    capacity_ = capacity;
  }

  int64_t batch_size_;
  std::shared_ptr<BatchSlots> slots_;  // where a map before the batch placed rows; may be null
  Element first_;                      // the batch's first element: the shapes and dtypes of its rows
  std::vector<Tensor> columns_;        // one per component, capacity_ rows
  int64_t count_ = 0, capacity_ = 0;
};

class BatchNode : public UnaryNode {
 public:
  BatchNode(NodePtr input, int64_t batch_size, bool drop_remainder, bool padded, std::vector<Shape> padded_shapes,
            std::vector<double> padding_values)
      : UnaryNode(std::move(input)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        padded_(padded),
        padded_shapes_(std::move(padded_shapes)),
        padding_values_(std::move(padding_values)) {}

  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    auto stats = node_stats(ctx, padded_ ? "padded_batch" : "batch");
    if (padded_) return std::make_unique<It>(stats, this, make_input_iterator(*input_, ctx), nullptr);
    ctx.batch_input = input_.get();
    ctx.batch_slots = std::make_shared<BatchSlots>(batch_size_);
    const std::shared_ptr<BatchSlots> slots = ctx.batch_slots;
    auto input = make_input_iterator(*input_, ctx);
    const bool map_places_rows = ctx.batch_slots == nullptr;  // the map took them
    ctx.batch_input = nullptr;
    ctx.batch_slots.reset();
    return std::make_unique<It>(stats, this, std::move(input), map_places_rows ? slots : nullptr);
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (n < 0) return n;
    return drop_remainder_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  }
  std::string describe() const override {
    return fmt::format("{}({}, drop_remainder={})", padded_ ? "padded_batch" : "batch", batch_size_, drop_remainder_);
  }

  Element pad_combine(std::vector<Element>& parts) const {
    for (size_t i = 1; i < parts.size(); ++i) check_components(parts[0], parts[i]);
    Element out;
    for (size_t c = 0; c < parts[0].size(); ++c) {
      std::vector<Tensor> column;
      column.reserve(parts.size());
      for (auto& p : parts) column.push_back(p[c]);
      out.push_back(pad_stack(column, c));
    }
    return out;
  }

 private:
  Tensor pad_stack(const std::vector<Tensor>& column, size_t component) const {
    const int rank = column[0].rank();
    const DType dtype = column[0].dtype();
    Shape target = column[0].shape();
    for (const Tensor& t : column) {
      if (t.rank() != rank || t.dtype() != dtype) {
        throw InvalidArgument(fmt::format(
            "padded_batch: component {} has {}{} and {}{} in one batch: ranks and "
            "dtypes must agree",
            component, dtype_name(dtype), column[0].shape().to_string(), dtype_name(t.dtype()), t.shape().to_string()));
      }
      for (int d = 0; d < rank; ++d) target[d] = std::max(target[d], t.dim(d));
    }
    if (component < padded_shapes_.size()) {
      const Shape& wanted = padded_shapes_[component];
      if (wanted.rank() != rank) {
        throw InvalidArgument(
            fmt::format("padded_batch: padded shape {} for component {} has rank {}, its elements "
                        "have rank {}",
                        wanted.to_string(), component, wanted.rank(), rank));
      }
      for (int d = 0; d < rank; ++d) {
        if (wanted[d] < 0) continue;
        if (wanted[d] < target[d]) {
          throw InvalidArgument(
              fmt::format("padded_batch: component {} has an element of shape {}, larger than its "
                          "padded shape {}",
                          component, target.to_string(), wanted.to_string()));
        }
        target[d] = wanted[d];
      }
    }
    Shape shape{static_cast<int64_t>(column.size())};
    for (int64_t d : target.dims()) shape.push_back(d);
    Tensor out = host_tensor(shape, dtype);
    fill_value(out, component < padding_values_.size() ? padding_values_[component] : 0.0);
    const size_t row_bytes = static_cast<size_t>(target.numel()) * dtype_size(dtype);
    for (size_t i = 0; i < column.size(); ++i) {
      copy_into_corner(column[i], static_cast<char*>(out.raw_data()) + i * row_bytes, target);
    }
    return out;
  }

  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const BatchNode* node, std::unique_ptr<IteratorImpl> input,
       std::shared_ptr<BatchSlots> slots)
        : IteratorImpl(std::move(stats)),
          node_(node),
          input_(std::move(input)),
          rows_(node->batch_size_, std::move(slots)) {}
    std::optional<Element> get_next() override {
      if (done_) return std::nullopt;
      // Elements gathered before an input error stay for the next call.
      while (gathered() < node_->batch_size_) {
        auto element = pull(*input_);
        if (!element) {
          done_ = true;
          break;
        }
        if (node_->padded_) {
          parts_.push_back(std::move(*element));
        } else {
          rows_.add(*element);
        }
      }
      const int64_t count = gathered();
      if (count == 0 || (node_->drop_remainder_ && count < node_->batch_size_)) return std::nullopt;
      if (!node_->padded_) return rows_.take();
      std::vector<Element> parts = std::move(parts_);
      parts_.clear();
      return node_->pad_combine(parts);
    }

   private:
    int64_t gathered() const { return node_->padded_ ? static_cast<int64_t>(parts_.size()) : rows_.count(); }

    const BatchNode* node_;
    std::unique_ptr<IteratorImpl> input_;
    std::vector<Element> parts_;  // padded_batch: the elements of the batch so far
    BatchRows rows_;              // batch: the rows copied so far
    bool done_ = false;
  };

  int64_t batch_size_;
  bool drop_remainder_;
  bool padded_;
  std::vector<Shape> padded_shapes_;
  std::vector<double> padding_values_;
};

class UnbatchNode : public UnaryNode {
 public:
  explicit UnbatchNode(NodePtr input) : UnaryNode(std::move(input)) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "unbatch"), make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override { return unknown_unless_infinite(); }
  std::string describe() const override { return "unbatch"; }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      while (index_ >= rows_) {
        auto element = pull(*input_);
        if (!element) return std::nullopt;
        for (size_t c = 0; c < element->size(); ++c) {
          const Tensor& t = (*element)[c];
          if (t.rank() == 0 || t.dim(0) != (*element)[0].dim(0)) {
            throw InvalidArgument(
                fmt::format("unbatch: components must share a first dimension, got {}", element_signature(*element)));
          }
        }
        current_ = std::move(*element);
        rows_ = current_.empty() ? 0 : current_[0].dim(0);
        index_ = 0;
      }
      Element out;
      for (const Tensor& t : current_) out.push_back(slice0(t, index_));
      ++index_;
      return out;
    }

   private:
    std::unique_ptr<IteratorImpl> input_;
    Element current_;
    int64_t rows_ = 0, index_ = 0;
  };
};

}  // namespace

NodePtr make_batch_node(NodePtr input, int64_t batch_size, bool drop_remainder, bool padded,
                        std::vector<Shape> padded_shapes, std::vector<double> padding_values) {
  return std::make_shared<BatchNode>(std::move(input), batch_size, drop_remainder, padded, std::move(padded_shapes),
                                     std::move(padding_values));
}
NodePtr make_unbatch_node(NodePtr input) { return std::make_shared<UnbatchNode>(std::move(input)); }

}  // namespace nimbus::data::detail
