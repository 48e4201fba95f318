// A TokenSequence over a vector of ids: a tokenized text.
#include <fmt/format.h>

#include <algorithm>

#include "nimbus/data/token_sequence.h"

namespace nimbus::data {
namespace {

class TokensInMemory : public TokenSequence {
 public:
  TokensInMemory(std::vector<int32_t> tokens, std::string origin)
      : tokens_(std::move(tokens)), origin_(std::move(origin)) {}
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  void copy(int64_t begin, int64_t count, int32_t* out) const override {
    std::copy_n(tokens_.begin() + begin, count, out);
  }
  std::string describe() const override { return fmt::format("{} tokens of {}", tokens_.size(), origin_); }

 private:
  std::vector<int32_t> tokens_;
  std::string origin_;
};

}  // namespace

std::shared_ptr<const TokenSequence> tokens_in_memory(std::vector<int32_t> tokens, std::string origin) {
  return std::make_shared<TokensInMemory>(std::move(tokens), std::move(origin));
}

}  // namespace nimbus::data
