// The known name nearest to a mistyped one (edit distance), for "did you mean" hints.
#pragma once

#include <string>
#include <vector>

namespace nimbus::train {

std::string closest_name(const std::string& name, const std::vector<std::string>& known);

}  // namespace nimbus::train
