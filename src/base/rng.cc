#include "nimbus/base/rng.h"

#include <fmt/format.h>

#include <cmath>
#include <mutex>
#include <numbers>
#include <unordered_map>

#include "nimbus/base/error.h"
#include "nimbus/base/philox.h"

namespace nimbus {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  const PhiloxBlock block = philox4x32_block(key, counter_hi, counter_lo);
  return {block.words[0], block.words[1], block.words[2], block.words[3]};
}

double philox_uniform_double(uint64_t seed, uint64_t i) {
  const auto words = philox4x32(seed, 1, i >> 1);
  const uint64_t hi = words[(i & 1) * 2], lo = words[(i & 1) * 2 + 1];
  return static_cast<double>(((hi << 32) | lo) >> 11) * 0x1.0p-53;
}

double philox_normal(uint64_t seed, uint64_t i) {
  // Each normal uses its own pair of uniforms: (2i, 2i + 1) in a separate stream.
  const auto words = philox4x32(seed, 2, i);
  const uint64_t a = (static_cast<uint64_t>(words[0]) << 32) | words[1];
  const uint64_t b = (static_cast<uint64_t>(words[2]) << 32) | words[3];
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]: log is finite
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

namespace {
struct GeneratorRegistry {
  std::mutex mutex;
  std::unordered_map<uint64_t, Generator*> live;
  uint64_t next_id = 1;
};
GeneratorRegistry& registry() {
  static GeneratorRegistry r;
  return r;
}
uint64_t register_generator(Generator* generator) {
  GeneratorRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  const uint64_t id = r.next_id++;
  r.live[id] = generator;
  return id;
}
}  // namespace

Generator::Generator(uint64_t seed) : id_(register_generator(this)), seed_(seed) {}
Generator::Generator(const Generator& other)
    : id_(register_generator(this)), seed_(other.seed()), offset_(other.offset()) {}
Generator::~Generator() {
  GeneratorRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  r.live.erase(id_);
}

Generator& find_generator(uint64_t id) {
  GeneratorRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(id);
  if (it == r.live.end()) {
    throw NotFound(fmt::format("random generator {} no longer exists", id),
                   "keep a Generator alive as long as the traced functions that draw from it");
  }
  return *it->second;
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace nimbus
