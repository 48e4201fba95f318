#include "nimbus/base/rng.h"

#include <fmt/format.h>

#include <cmath>
#include <mutex>
#include <numbers>
#include <unordered_map>

#include "nimbus/base/error.h"

namespace nimbus {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  // Constants from the Random123 reference implementation.
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
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
