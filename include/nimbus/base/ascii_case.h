// ASCII case folding, for names matched without regard to case (GPU, cloud and instance names of the
// catalogs, HTTP header names).
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace nimbus {

inline std::string ascii_lower(std::string_view text) {
  std::string lowered(text);
  std::ranges::transform(lowered, lowered.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lowered;
}

}  // namespace nimbus
