// shuffle: a buffer of buffer_size elements; each output is a uniform draw
// from it, replaced by the next input element (tf.data's algorithm).
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

class ShuffleNode : public UnaryNode {
 public:
  ShuffleNode(NodePtr input, int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle)
      : UnaryNode(std::move(input)), buffer_size_(buffer_size), seed_(seed), reshuffle_(reshuffle) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    // Seeded: the same orders in every run. Unseeded: the iterator's seed.
    // Each new iterator of this node within one iteration (repeat's epochs)
    // and each new iteration reshuffles, unless reshuffle is off.
    const uint64_t base = seed_ ? *seed_ : ctx.seed;
    const uint64_t epoch = ctx.next_epoch(this);
    const uint64_t seed = reshuffle_ ? mix_seed(mix_seed(base, seed_ ? ctx.iteration : 0), epoch) : mix_seed(base, 0);
    return std::make_unique<It>(node_stats(ctx, "shuffle"), buffer_size_, seed, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override { return input_->cardinality(); }
  std::string describe() const override {
    return fmt::format("shuffle(buffer={}, seed={}, reshuffle={})", buffer_size_,
                       seed_ ? std::to_string(*seed_) : std::string("none"), reshuffle_);
  }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, int64_t buffer_size, uint64_t seed, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), buffer_size_(buffer_size), rng_(seed), input_(std::move(input)) {
      this->stats().buffer_capacity = buffer_size;
    }
    ~It() override { account(-bytes_); }

    std::optional<Element> get_next() override {
      while (!input_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
        auto element = pull(*input_);
        if (!element) {
          input_done_ = true;
          break;
        }
        account(element_bytes(*element));
        buffer_.push_back(std::move(*element));
      }
      stats().buffer_fill = static_cast<int64_t>(buffer_.size());
      if (buffer_.empty()) return std::nullopt;
      const size_t pick = rng_.below(buffer_.size());
      Element out = std::move(buffer_[pick]);
      buffer_[pick] = std::move(buffer_.back());
      buffer_.pop_back();
      account(-element_bytes(out));
      return out;
    }

   private:
    void account(int64_t bytes) {
      bytes_ += bytes;
      stats().buffer_bytes += bytes;
    }
    int64_t buffer_size_;
    Rng rng_;
    std::unique_ptr<IteratorImpl> input_;
    std::vector<Element> buffer_;
    bool input_done_ = false;
    int64_t bytes_ = 0;
  };

  int64_t buffer_size_;
  std::optional<uint64_t> seed_;
  bool reshuffle_;
};

}  // namespace

NodePtr make_shuffle_node(NodePtr input, int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle) {
  return std::make_shared<ShuffleNode>(std::move(input), buffer_size, seed, reshuffle);
}

}  // namespace nimbus::data::detail
