// Random numbers: Philox4x32-10, a counter-based generator (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11; also cuRAND's and
// JAX's). The n-th number of a stream depends only on (seed, n), so kernels
// draw in parallel on any number of threads, or on a GPU, and get the same
// bits.
//
//   Generator gen(42);
//   uint64_t offset = gen.reserve(1024);          // this call owns numbers [offset, offset + 1024)
//   float u = philox_uniform(gen.seed(), offset + i);  // in [0, 1)
//
// The process-wide default_generator() is what creation ops use when the
// caller passes none; runtime.seed sets it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace nimbus {

// Four 32-bit random words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

// The i-th uniform float in [0, 1) of stream `seed` (24 random bits).
inline float philox_uniform(uint64_t seed, uint64_t i) {
  const auto words = philox4x32(seed, 0, i >> 2);
  return static_cast<float>(words[i & 3] >> 8) * 0x1.0p-24f;
}

// The i-th uniform double in [0, 1) of stream `seed` (53 random bits).
double philox_uniform_double(uint64_t seed, uint64_t i);

// The i-th standard normal of stream `seed` (Box-Muller over a pair of uniforms).
double philox_normal(uint64_t seed, uint64_t i);

// A stream of random numbers: a seed and the index of the next number.
// Generators are registered by id so that a traced graph can name the one its
// random ops draw from and claim fresh numbers from it on every run.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0);
  Generator(const Generator& other);
  Generator& operator=(const Generator&) = delete;
  ~Generator();

  uint64_t id() const { return id_; }
  uint64_t seed() const { return seed_.load(); }
  uint64_t offset() const { return offset_.load(); }
  // Restarts the stream (as after a checkpoint restore).
  void set_state(uint64_t seed, uint64_t offset) {
    seed_.store(seed);
    offset_.store(offset);
  }
  // Claims `count` numbers of the stream and returns the first one's index.
  uint64_t reserve(uint64_t count) { return offset_.fetch_add(count); }

 private:
  uint64_t id_;
  std::atomic<uint64_t> seed_;
  std::atomic<uint64_t> offset_{0};
};

// The live generator with this id; NotFound once it has been destroyed.
Generator& find_generator(uint64_t id);

// The process-wide generator (seed 0 until runtime.seed or manual_seed sets it).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace nimbus
