// Transforms that pick which input elements pass, in order: repeat, take,
// skip, shard, filter, ignore_errors.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

class RepeatNode : public UnaryNode {
 public:
  RepeatNode(NodePtr input, int64_t count) : UnaryNode(std::move(input)), count_(count) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "repeat"), this, ctx);
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (count_ == 0 || n == 0) return 0;
    if (n == kInfiniteCardinality || count_ < 0) {
      return n == kUnknownCardinality ? kUnknownCardinality : kInfiniteCardinality;
    }
    if (n == kUnknownCardinality) return kUnknownCardinality;
    return n * count_;
  }
  std::string describe() const override { return fmt::format("repeat({})", count_); }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const RepeatNode* node, IteratorContext& ctx)
        : IteratorImpl(std::move(stats)), node_(node), ctx_(ctx), depth_(ctx.depth) {}
    std::optional<Element> get_next() override {
      for (;;) {
        if (node_->count_ >= 0 && epoch_ >= node_->count_) return std::nullopt;
        if (!input_) {
          IteratorContext ctx = ctx_;
          ctx.depth = depth_;
          input_ = make_input_iterator(*node_->input_, ctx);
          produced_this_epoch_ = 0;
        }
        std::optional<Element> element = pull(*input_);
        if (element) {
          ++produced_this_epoch_;
          return element;
        }
        input_.reset();
        ++epoch_;
        // An empty input would otherwise repeat forever.
        if (produced_this_epoch_ == 0) return std::nullopt;
      }
    }

   private:
    const RepeatNode* node_;
    IteratorContext ctx_;
    int depth_;
    std::unique_ptr<IteratorImpl> input_;
    int64_t epoch_ = 0;
    int64_t produced_this_epoch_ = 0;
  };
  int64_t count_;
};

// take(count) and skip(count).
class TakeSkipNode : public UnaryNode {
 public:
  TakeSkipNode(NodePtr input, int64_t count, bool take) : UnaryNode(std::move(input)), count_(count), take_(take) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, take_ ? "take" : "skip"), this, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (take_) {
      if (count_ < 0) return n;
      if (n == kInfiniteCardinality) return count_;
      if (n == kUnknownCardinality) return kUnknownCardinality;
      return std::min(n, count_);
    }
    if (n < 0) return n;
    if (count_ < 0) return 0;
    return std::max<int64_t>(0, n - count_);
  }
  std::string describe() const override { return fmt::format("{}({})", take_ ? "take" : "skip", count_); }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const TakeSkipNode* node, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), node_(node), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      if (node_->take_) {
        if (node_->count_ >= 0 && seen_ >= node_->count_) return std::nullopt;
        auto element = pull(*input_);
        if (element) ++seen_;
        return element;
      }
      while (node_->count_ < 0 || seen_ < node_->count_) {
        auto element = pull(*input_);
        if (!element) return std::nullopt;
        ++seen_;
      }
      return pull(*input_);
    }

   private:
    const TakeSkipNode* node_;
    std::unique_ptr<IteratorImpl> input_;
    int64_t seen_ = 0;
  };
  int64_t count_;
  bool take_;
};

class ShardNode : public UnaryNode {
 public:
  ShardNode(NodePtr input, int64_t num_shards, int64_t index)
      : UnaryNode(std::move(input)), num_shards_(num_shards), index_(index) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "shard"), this, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (n < 0) return n;
    return n / num_shards_ + (n % num_shards_ > index_ ? 1 : 0);
  }
  std::string describe() const override { return fmt::format("shard({}, {})", num_shards_, index_); }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const ShardNode* node, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), node_(node), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      for (;;) {
        // Count positions before pulling: an input error still uses up its slot.
        const int64_t position = position_++;
        auto element = pull(*input_);
        if (!element) return std::nullopt;
        if (position % node_->num_shards_ == node_->index_) return element;
      }
    }

   private:
    const ShardNode* node_;
    std::unique_ptr<IteratorImpl> input_;
    int64_t position_ = 0;
  };
  int64_t num_shards_, index_;
};

class FilterNode : public UnaryNode {
 public:
  FilterNode(NodePtr input, FilterFn predicate) : UnaryNode(std::move(input)), predicate_(std::move(predicate)) {
    if (!predicate_) throw InvalidArgument("filter: no predicate given");
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "filter"), this, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override { return unknown_unless_infinite(); }
  std::string describe() const override { return "filter"; }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const FilterNode* node, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), node_(node), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      for (;;) {
        auto element = pull(*input_);
        if (!element || node_->predicate_(*element)) return element;
      }
    }

   private:
    const FilterNode* node_;
    std::unique_ptr<IteratorImpl> input_;
  };
  FilterFn predicate_;
};

class IgnoreErrorsNode : public UnaryNode {
 public:
  IgnoreErrorsNode(NodePtr input, ErrorHandler on_error)
      : UnaryNode(std::move(input)), on_error_(std::move(on_error)) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "ignore_errors"), this, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override { return unknown_unless_infinite(); }
  std::string describe() const override { return "ignore_errors"; }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const IgnoreErrorsNode* node, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), node_(node), input_(std::move(input)) {}
    std::optional<Element> get_next() override {
      for (;;) {
        try {
          return pull(*input_);
        } catch (const Error& error) {
          ++errors_;
          if (node_->on_error_) node_->on_error_(error, errors_);  // may throw: this iteration stops
          // Skipped and counted (the count is in stats(); the last message in its note).
          stats().errors_skipped++;
          stats().set_note(fmt::format("last skipped: {}", error.message()));
        }
      }
    }

   private:
    const IgnoreErrorsNode* node_;
    std::unique_ptr<IteratorImpl> input_;
    int64_t errors_ = 0;
  };
  ErrorHandler on_error_;
};

}  // namespace

NodePtr make_repeat_node(NodePtr input, int64_t count) { return std::make_shared<RepeatNode>(std::move(input), count); }
NodePtr make_take_skip_node(NodePtr input, int64_t count, bool take) {
  return std::make_shared<TakeSkipNode>(std::move(input), count, take);
}
NodePtr make_shard_node(NodePtr input, int64_t num_shards, int64_t index) {
  return std::make_shared<ShardNode>(std::move(input), num_shards, index);
}
NodePtr make_filter_node(NodePtr input, FilterFn predicate) {
  return std::make_shared<FilterNode>(std::move(input), std::move(predicate));
}
NodePtr make_ignore_errors_node(NodePtr input, ErrorHandler on_error) {
  return std::make_shared<IgnoreErrorsNode>(std::move(input), std::move(on_error));
}

}  // namespace nimbus::data::detail
