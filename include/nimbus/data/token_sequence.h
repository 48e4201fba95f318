// TokenSequence: a long run of token ids that a language model's windows are
// cut from, held in memory (a tokenized text) or mapped from packed token files
// (packed_tokens.h). Windows read it by position, so a corpus larger than
// memory is read page by page, never copied whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nimbus::data {

class TokenSequence {
 public:
  virtual ~TokenSequence() = default;
  // Number of tokens.
  virtual int64_t size() const = 0;
  // Tokens [begin, begin + count) as int32, into `out`; the range must lie inside [0, size()).
  virtual void copy(int64_t begin, int64_t count, int32_t* out) const = 0;
  // One line: where the tokens come from ("text of 12 files, byte tokenizer").
  virtual std::string describe() const = 0;
};

// Tokens held in memory; `origin` is what describe() says.
std::shared_ptr<const TokenSequence> tokens_in_memory(std::vector<int32_t> tokens, std::string origin);

}  // namespace nimbus::data
