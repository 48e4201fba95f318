// batch, padded_batch and unbatch.
#include <fmt/format.h>

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
    return std::make_unique<It>(node_stats(ctx, padded_ ? "padded_batch" : "batch"), this,
                                make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (n < 0) return n;
    return drop_remainder_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  }
  std::string describe() const override {
    return fmt::format("{}({}, drop_remainder={})", padded_ ? "padded_batch" : "batch", batch_size_, drop_remainder_);
  }

  Element combine(std::vector<Element>& parts) const {
    const size_t components = parts[0].size();
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i].size() != components) {
        throw InvalidArgument(fmt::format("batch: elements have different numbers of components: {} and {}",
                                          element_signature(parts[0]), element_signature(parts[i])));
      }
    }
    Element out;
    for (size_t c = 0; c < components; ++c) {
      std::vector<Tensor> column;
      column.reserve(parts.size());
      for (auto& p : parts) column.push_back(p[c]);
      out.push_back(padded_ ? pad_stack(column, c) : stack0(column, "batch"));
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
    It(std::shared_ptr<NodeStats> stats, const BatchNode* node, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), node_(node), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      if (done_) return std::nullopt;
      // Elements gathered before an input error stay for the next call.
      while (static_cast<int64_t>(parts_.size()) < node_->batch_size_) {
        auto element = pull(*input_);
        if (!element) {
          done_ = true;
          break;
        }
        parts_.push_back(std::move(*element));
      }
      std::vector<Element> parts = std::move(parts_);
      parts_.clear();
      if (parts.empty() || (node_->drop_remainder_ && static_cast<int64_t>(parts.size()) < node_->batch_size_)) {
        return std::nullopt;
      }
      return node_->combine(parts);
    }

   private:
    const BatchNode* node_;
    std::unique_ptr<IteratorImpl> input_;
    std::vector<Element> parts_;
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
