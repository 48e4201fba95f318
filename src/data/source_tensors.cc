// In-memory sources: from_tensors, from_tensor_slices, range, from_generator.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

class TensorsNode : public DatasetNode {
 public:
  TensorsNode(Element components, bool slices) : components_(std::move(components)), slices_(slices) {
    if (components_.empty()) throw InvalidArgument("from_tensors/from_tensor_slices: no tensors given");
    for (size_t i = 0; i < components_.size(); ++i) {
      const Tensor& t = components_[i];
      if (!t.defined() || t.is_symbolic() || !t.device().is_cpu()) {
        throw InvalidArgument(fmt::format("dataset source: component {} must be a defined host tensor", i));
      }
      if (slices_) {
        if (t.rank() == 0) {
          throw InvalidArgument(
              fmt::format("from_tensor_slices: component {} is a scalar; it has no axis to slice", i));
        }
        if (t.dim(0) != components_[0].dim(0)) {
          throw InvalidArgument(
              fmt::format("from_tensor_slices: components have different first dimensions: {} has "
                          "shape {}, component 0 has {}",
                          i, t.shape().to_string(), components_[0].shape().to_string()));
        }
      }
    }
    count_ = slices_ ? components_[0].dim(0) : 1;
  }

  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, slices_ ? "from_tensor_slices" : "from_tensors"), this);
  }
  int64_t cardinality() const override { return count_; }
  std::string describe() const override {
    return fmt::format("{}{}", slices_ ? "from_tensor_slices" : "from_tensors", element_signature(components_));
  }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const TensorsNode* node) : IteratorImpl(std::move(stats)), node_(node) {}
    std::optional<Element> get_next() override {
      if (index_ >= node_->count_) return std::nullopt;
      const int64_t i = index_++;
      if (!node_->slices_) return node_->components_;
      Element out;
      out.reserve(node_->components_.size());
      for (const Tensor& t : node_->components_) out.push_back(slice0(t, i));
      return out;
    }

   private:
    const TensorsNode* node_;
    int64_t index_ = 0;
  };

  Element components_;
  bool slices_;
  int64_t count_ = 0;
};

class RangeNode : public DatasetNode {
 public:
  RangeNode(int64_t start, int64_t stop, int64_t step) : start_(start), stop_(stop), step_(step) {
    if (step == 0) throw InvalidArgument("range: step must not be 0");
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "range"), start_, stop_, step_);
  }
  int64_t cardinality() const override {
    if (step_ > 0) return stop_ > start_ ? (stop_ - start_ + step_ - 1) / step_ : 0;
    return start_ > stop_ ? (start_ - stop_ - step_ - 1) / -step_ : 0;
  }
  std::string describe() const override { return fmt::format("range({}, {}, {})", start_, stop_, step_); }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, int64_t start, int64_t stop, int64_t step)
        : IteratorImpl(std::move(stats)), next_(start), stop_(stop), step_(step) {}
    std::optional<Element> get_next() override {
      if (step_ > 0 ? next_ >= stop_ : next_ <= stop_) return std::nullopt;
      Tensor t = host_tensor(Shape{}, DType::kI64);
      *t.data<int64_t>() = next_;
      next_ += step_;
      return Element{t};
    }

   private:
    int64_t next_, stop_, step_;
  };
  int64_t start_, stop_, step_;
};

class GeneratorNode : public DatasetNode {
 public:
  GeneratorNode(GeneratorFactory factory, std::string name) : factory_(std::move(factory)), name_(std::move(name)) {
    if (!factory_) throw InvalidArgument("from_generator: no generator factory given");
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "from_generator"), factory_());
  }
  std::string describe() const override { return fmt::format("from_generator({})", name_); }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, GeneratorFn fn) : IteratorImpl(std::move(stats)), fn_(std::move(fn)) {}
    std::optional<Element> get_next() override {
      if (done_) return std::nullopt;
      std::optional<Element> out = fn_();
      if (!out) {
        done_ = true;
      } else {
        stats().source_reads++;
      }
      return out;
    }

   private:
    GeneratorFn fn_;
    bool done_ = false;
  };
  GeneratorFactory factory_;
  std::string name_;
};

}  // namespace

NodePtr make_tensors_node(Element components, bool slices) {
  return std::make_shared<TensorsNode>(std::move(components), slices);
}
NodePtr make_range_node(int64_t start, int64_t stop, int64_t step) {
  return std::make_shared<RangeNode>(start, stop, step);
}
NodePtr make_generator_node(GeneratorFactory factory, std::string name) {
  return std::make_shared<GeneratorNode>(std::move(factory), std::move(name));
}

}  // namespace nimbus::data::detail
