// Tokenizers turn text into the token ids a language model reads and back.
// byte_tokenizer(): each byte is its own token (vocabulary 256, no files),
// lossless for any input. SentencePiece models: sentencepiece.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nimbus::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The text of `ids`; an id outside the vocabulary is an InvalidArgument.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // One line: "byte tokenizer", "sentencepiece 'a.model' (vocabulary 8000)".
  virtual std::string describe() const = 0;
};

std::shared_ptr<const Tokenizer> byte_tokenizer();

}  // namespace nimbus::data
