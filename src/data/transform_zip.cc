// Transforms that join components: zip and enumerate.
#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

class ZipNode : public DatasetNode {
 public:
  explicit ZipNode(std::vector<NodePtr> inputs) : inputs_(std::move(inputs)) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    std::vector<std::unique_ptr<IteratorImpl>> inputs;
    for (const auto& input : inputs_) inputs.push_back(make_input_iterator(*input, ctx));
    return std::make_unique<It>(node_stats(ctx, "zip"), std::move(inputs));
  }
  int64_t cardinality() const override {
    bool unknown = false;
    int64_t smallest = kInfiniteCardinality;
    for (const auto& input : inputs_) {
      const int64_t n = input->cardinality();
      if (n == kUnknownCardinality) {
        unknown = true;
      } else if (n != kInfiniteCardinality) {
        smallest = smallest == kInfiniteCardinality ? n : std::min(smallest, n);
      }
    }
    if (unknown) return kUnknownCardinality;
    return smallest;
  }
  std::string describe() const override { return fmt::format("zip({} datasets)", inputs_.size()); }
  std::vector<NodePtr> inputs() const override { return inputs_; }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, std::vector<std::unique_ptr<IteratorImpl>> inputs)
        : IteratorImpl(std::move(stats)), inputs_(std::move(inputs)) {}
    std::optional<Element> get_next() override {
      if (done_) return std::nullopt;
      Element out;
      for (auto& input : inputs_) {
        auto element = pull(*input);
        if (!element) {
          done_ = true;
          return std::nullopt;
        }
        for (auto& t : *element) out.push_back(std::move(t));
      }
      return out;
    }

   private:
    std::vector<std::unique_ptr<IteratorImpl>> inputs_;
    bool done_ = false;
  };
  std::vector<NodePtr> inputs_;
};

class EnumerateNode : public UnaryNode {
 public:
  EnumerateNode(NodePtr input, int64_t start) : UnaryNode(std::move(input)), start_(start) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "enumerate"), start_, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override { return input_->cardinality(); }
  std::string describe() const override { return fmt::format("enumerate({})", start_); }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, int64_t start, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), next_(start), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      auto element = pull(*input_);
      if (!element) return std::nullopt;
      Tensor index = host_tensor(Shape{}, DType::kI64);
      *index.data<int64_t>() = next_++;
      element->insert(element->begin(), index);
      return element;
    }

   private:
    int64_t next_;
    std::unique_ptr<IteratorImpl> input_;
  };
  int64_t start_;
};

}  // namespace

NodePtr make_zip_node(std::vector<NodePtr> inputs) { return std::make_shared<ZipNode>(std::move(inputs)); }
NodePtr make_enumerate_node(NodePtr input, int64_t start) {
  return std::make_shared<EnumerateNode>(std::move(input), start);
}

}  // namespace nimbus::data::detail
