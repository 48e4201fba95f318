// Incremental decoding's state (a KV cache), private to the layers and generate(). While a
// DecodingScope is alive on this thread, a model called on new tokens alone continues the
// sequence the cache holds: causal MultiHeadAttention appends the new keys and values to its
// entry and attends over all of them, PositionEmbedding starts at offset(), and the model takes
// a sequence axis shorter than its input's. generate() advances the offset after each call.
#pragma once

#include <cstdint>
#include <map>

#include "nimbus/tensor/tensor.h"

namespace nimbus::nn::internal {

class DecodingCache {
 public:
  // An attention layer's keys and values so far, (N, heads, offset(), dim); undefined before its first call.
  struct Entry {
    Tensor keys, values;
  };

  // Tokens the cache holds (the position of the next one).
  int64_t offset() const { return offset_; }
  void advance(int64_t tokens) { offset_ += tokens; }
  Entry& entry(const void* layer) { return entries_[layer]; }

 private:
  int64_t offset_ = 0;
  std::map<const void*, Entry> entries_;
};

// The cache of this thread's innermost DecodingScope; null outside one.
DecodingCache* active_decoding_cache();

class DecodingScope {
 public:
  explicit DecodingScope(DecodingCache& cache);
  ~DecodingScope();
  DecodingScope(const DecodingScope&) = delete;
  DecodingScope& operator=(const DecodingScope&) = delete;

 private:
  DecodingCache* previous_;
};

}  // namespace nimbus::nn::internal
