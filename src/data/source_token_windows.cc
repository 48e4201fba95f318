// token_windows: (x, y) windows over a TokenSequence, read by position (a
// known cardinality, so shuffle, take and restore need no pass over the data).
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/data/token_windows.h"
#include "src/data/pipeline.h"

namespace nimbus::data {

int64_t token_window_count(int64_t tokens, int64_t sequence_length, int64_t stride) {
  if (tokens < sequence_length + 1) return 0;
  return (tokens - sequence_length - 1) / stride + 1;
}

namespace detail {
namespace {

class TokenWindowsNode : public DatasetNode {
 public:
  TokenWindowsNode(std::shared_ptr<const TokenSequence> tokens, int64_t sequence_length, int64_t stride)
      : tokens_(std::move(tokens)), sequence_length_(sequence_length), stride_(stride) {
    if (!tokens_) throw InvalidArgument("token_windows: no token sequence given");
    if (sequence_length <= 0 || stride <= 0) {
      throw InvalidArgument(fmt::format("token_windows: sequence_length and stride must be positive, got {} and {}",
                                        sequence_length, stride));
    }
    count_ = token_window_count(tokens_->size(), sequence_length_, stride_);
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "token_windows"), this);
  }
  int64_t cardinality() const override { return count_; }
  std::string describe() const override {
    return fmt::format("token_windows(sequence_length {}, stride {}, {} windows of {})", sequence_length_, stride_,
                       count_, tokens_->describe());
  }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const TokenWindowsNode* node) : IteratorImpl(std::move(stats)), node_(node) {}
    std::optional<Element> get_next() override {
      if (index_ >= node_->count_) return std::nullopt;
      const int64_t length = node_->sequence_length_;
      std::vector<int32_t> window(static_cast<size_t>(length + 1));
      node_->tokens_->copy(index_++ * node_->stride_, length + 1, window.data());
      Tensor x = host_tensor(Shape{length}, DType::kI32), y = host_tensor(Shape{length}, DType::kI32);
      std::copy_n(window.begin(), length, x.data<int32_t>());
      std::copy_n(window.begin() + 1, length, y.data<int32_t>());
      stats().source_reads++;
      return Element{x, y};
    }

   private:
    const TokenWindowsNode* node_;
    int64_t index_ = 0;
  };

  std::shared_ptr<const TokenSequence> tokens_;
  int64_t sequence_length_, stride_;
  int64_t count_ = 0;
};

}  // namespace
}  // namespace detail

Dataset token_windows(std::shared_ptr<const TokenSequence> tokens, int64_t sequence_length, int64_t stride) {
  return Dataset(std::make_shared<detail::TokenWindowsNode>(std::move(tokens), sequence_length, stride));
}

}  // namespace nimbus::data
