// Sizes in configs and flags: a byte count, or a number with a unit.
//
//   parse_size("12GiB");   // 12 * 1024^3 (KiB, MiB, GiB, TiB: powers of 1024)
//   parse_size("1.5 GB");  // 1.5e9       (KB, MB, GB, TB: powers of 1000)
//   parse_size("4096");    // 4096 bytes
//   format_bytes(19541484749);  // "18.2 GiB"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nimbus {

// Throws InvalidArgument naming the text for a malformed size or unknown unit.
uint64_t parse_size(std::string_view text);

// Human-readable size in powers of 1024 with one decimal ("512 B", "3.0 KiB", "18.2 GiB").
std::string format_bytes(uint64_t bytes);

}  // namespace nimbus
