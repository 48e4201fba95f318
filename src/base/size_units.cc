#include "nimbus/base/size_units.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>

#include "nimbus/base/error.h"

namespace nimbus {

uint64_t parse_size(std::string_view text) {
  const std::string_view original = text;
  auto fail = [&]() -> uint64_t {
    throw InvalidArgument(fmt::format("'{}' is not a size", original),
                          "write a byte count or a number with a unit: KiB, MiB, GiB, TiB (powers of 1024) "
                          "or KB, MB, GB, TB (powers of 1000), e.g. 12GiB");
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  size_t number_end = 0;
  while (number_end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[number_end])) || text[number_end] == '.')) {
    ++number_end;
  }
  if (number_end == 0) return fail();
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + number_end, value);
  if (ec != std::errc() || ptr != text.data() + number_end) return fail();
  std::string_view unit = text.substr(number_end);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  struct Unit {
    std::string_view name;
    double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},     {"B", 1},    {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},     {"TB", 1e12},    {"kB", 1e3},
  };
  for (const Unit& u : kUnits) {
    if (u.name == unit) {
      const double bytes = std::round(value * u.factor);
      if (value * u.factor != bytes && u.factor == 1) return fail();
      // Converting a double at or past 2^64 to an integer is undefined (llround stops at 2^63 already).
      if (bytes >= 0x1p64) {
        throw InvalidArgument(fmt::format("size '{}' is too large: sizes stop below 2^64 bytes (16 EiB)", original));
      }
      return static_cast<uint64_t>(bytes);
    }
  }
  return fail();
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = -1;
  // One decimal prints 1023.95 and above as "1024.0": those belong to the next unit.
  while (value >= 1023.95 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace nimbus
