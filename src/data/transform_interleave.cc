// interleave and flat_map: each input element becomes a dataset; the output
// draws block_length elements from each of cycle_length open datasets in
// turn, replacing an exhausted one with the next input element in its place.
// Parallel: up to num_parallel_calls open datasets (AUTOTUNE: one per core)
// are read ahead, each by its own prefetch thread; the order stays the same
// round robin.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

class InterleaveNode : public UnaryNode {
 public:
  InterleaveNode(NodePtr input, FlatMapFn fn, int cycle_length, int block_length, int parallelism)
      : UnaryNode(std::move(input)),
        fn_(std::move(fn)),
        cycle_length_(cycle_length),
        block_length_(block_length),
        parallelism_(parallelism) {
    if (!fn_) throw InvalidArgument("interleave/flat_map: no function given");
  }
  bool flat_map() const { return cycle_length_ == 1 && block_length_ == 1 && parallelism_ == 1; }

  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    auto stats = node_stats(ctx, flat_map() ? "flat_map" : "interleave");
    return std::make_unique<It>(stats, this, make_input_iterator(*input_, ctx), ctx);
  }
  int64_t cardinality() const override { return unknown_unless_infinite(); }
  std::string describe() const override {
    if (flat_map()) return "flat_map";
    return fmt::format("interleave(cycle={}, block={}, parallel={})", cycle_length_, block_length_,
                       parallelism_ == kAutotune ? std::string("autotune") : std::to_string(parallelism_));
  }

 private:
  struct Slot {
    NodePtr dataset;  // keeps the inner dataset alive while its iterator runs
    std::unique_ptr<IteratorImpl> iterator;
    int taken = 0;
    bool ahead = false;  // read ahead on its own thread
  };

  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const InterleaveNode* node, std::unique_ptr<IteratorImpl> input,
       IteratorContext& ctx)
        : IteratorImpl(std::move(stats)),
          node_(node),
          input_(std::move(input)),
          ctx_(ctx),
          depth_(ctx.depth),
          slots_(static_cast<size_t>(node->cycle_length_)) {
      parallel_ = node->parallelism_ != 1;
      if (parallel_) {
        // Read-ahead threads: num_parallel_calls of them (AUTOTUNE: one per
        // core), never more than the open datasets.
        const int wanted = node->parallelism_ == kAutotune ? ctx.cores : node->parallelism_;
        max_ahead_ = std::min(node->cycle_length_, wanted);
        this->stats().parallelism = max_ahead_;
        this->stats().autotuned = node->parallelism_ == kAutotune;
        this->stats().set_note(fmt::format(
            "{} of {} open datasets read ahead on their own threads ({}{} cores)", max_ahead_, node->cycle_length_,
            node->parallelism_ == kAutotune ? "autotune: one per core, " : "", ctx.cores));
      }
    }
    ~It() override {
      // Inner iterators first: their threads may be reading.
      for (auto& slot : slots_) slot.iterator.reset();
    }

    std::optional<Element> get_next() override {
      for (;;) {
        if (parallel_) open_all();
        bool any_open = false;
        for (const auto& slot : slots_) any_open = any_open || slot.iterator != nullptr;
        if (!any_open && input_done_) return std::nullopt;
        Slot& slot = slots_[current_];
        if (!slot.iterator) {
          if (!input_done_) open(slot);
          if (!slot.iterator) {
            advance();
            continue;
          }
        }
        auto element = pull(*slot.iterator);
        if (!element) {
          // As tf.data: move on; the next input element takes this place
          // when the round robin comes back to it.
          slot.iterator.reset();
          slot.dataset.reset();
          if (slot.ahead) --ahead_count_;
          slot.ahead = false;
          advance();
          continue;
        }
        if (++slot.taken >= node_->block_length_) advance();
        return element;
      }
    }

   private:
    void advance() {
      slots_[current_].taken = 0;
      current_ = (current_ + 1) % slots_.size();
    }
    // Opens empty places in the order the round robin will visit them, so
    // each input element lands where the sequential interleave puts it.
    void open_all() {
      for (size_t i = 0; i < slots_.size() && !input_done_; ++i) {
        Slot& slot = slots_[(current_ + i) % slots_.size()];
        if (!slot.iterator) open(slot);
      }
    }
    void open(Slot& slot) {
      auto element = pull(*input_);
      if (!element) {
        input_done_ = true;
        return;
      }
      Dataset dataset = node_->fn_(*element);
      IteratorContext ctx = ctx_;
      ctx.depth = depth_;
      slot.dataset = dataset.node();
      auto iterator = make_input_iterator(*slot.dataset, ctx);
      slot.ahead = parallel_ && ahead_count_ < max_ahead_;
      if (slot.ahead) {
        ++ahead_count_;
        ctx.depth = depth_ + 1;
        iterator = make_prefetch_iterator(std::move(iterator), node_stats(ctx, "interleave.read_ahead"),
                                          2 * node_->block_length_, ctx.cancelled);
      }
      slot.iterator = std::move(iterator);
      slot.taken = 0;
    }

    const InterleaveNode* node_;
    std::unique_ptr<IteratorImpl> input_;
    IteratorContext ctx_;
    int depth_;
    std::vector<Slot> slots_;
    size_t current_ = 0;
    bool input_done_ = false;
    bool parallel_ = false;
    int max_ahead_ = 0;
    int ahead_count_ = 0;
  };

  FlatMapFn fn_;
  int cycle_length_, block_length_, parallelism_;
};

}  // namespace

NodePtr make_interleave_node(NodePtr input, FlatMapFn fn, int cycle_length, int block_length, int parallelism) {
  return std::make_shared<InterleaveNode>(std::move(input), std::move(fn), cycle_length, block_length, parallelism);
}

}  // namespace nimbus::data::detail
