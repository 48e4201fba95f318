// SentencePiece tokenizers (Debian's libsentencepiece, optional: found at
// configure time; a build without it refuses these with a clear error).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nimbus/data/tokenizer.h"

namespace nimbus::data {

// Whether this build has SentencePiece.
bool sentencepiece_available();

// The tokenizer of a SentencePiece .model file; a missing or unreadable model is an error naming the file.
std::shared_ptr<const Tokenizer> sentencepiece_tokenizer(const std::string& model_path);

struct SentencePieceTraining {
  std::vector<std::string> input_files;  // plain text (gzip is read through zlib into a temporary file)
  std::string model_prefix;              // writes PREFIX.model and PREFIX.vocab
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";  // unigram | bpe | char | word
  double character_coverage = 1.0;
  bool byte_fallback = true;  // bytes outside the vocabulary become byte tokens, so nothing is unknown
};

// Trains a model as spm_train does; returns the .model path.
std::string train_sentencepiece(const SentencePieceTraining& options);

}  // namespace nimbus::data
