#include "src/nn/internal/decoding_cache.h"

namespace nimbus::nn::internal {

namespace {
thread_local DecodingCache* active_decoding_cache_of_thread = nullptr;
}  // namespace

DecodingCache* active_decoding_cache() { return active_decoding_cache_of_thread; }

DecodingScope::DecodingScope(DecodingCache& cache) : previous_(active_decoding_cache_of_thread) {
  active_decoding_cache_of_thread = &cache;
}

DecodingScope::~DecodingScope() { active_decoding_cache_of_thread = previous_; }

}  // namespace nimbus::nn::internal
