// token_windows: a language model's training examples from a TokenSequence.
// Window i holds the sequence_length + 1 tokens starting at i * stride; its
// element is (x, y) with x = window[:-1] and y = window[1:], both int32 of
// shape (sequence_length): y is x shifted by one, the next token at each place.
//
//   auto tokens = tokens_in_memory(byte_tokenizer()->encode(text), "text");
//   Dataset ds = token_windows(tokens, 256, 256).shuffle(1000, 1).batch(32, true);
//
// A stride below sequence_length overlaps windows (more examples per epoch);
// tokens after the last whole window are not used.
#pragma once

#include <cstdint>
#include <memory>

#include "nimbus/data/dataset.h"
#include "nimbus/data/token_sequence.h"

namespace nimbus::data {

// How many windows a sequence of `tokens` tokens gives (0 when it is shorter than one window).
int64_t token_window_count(int64_t tokens, int64_t sequence_length, int64_t stride);

// The windows of `tokens` as a dataset of (x, y); sequence_length and stride must be positive.
Dataset token_windows(std::shared_ptr<const TokenSequence> tokens, int64_t sequence_length, int64_t stride);

}  // namespace nimbus::data
