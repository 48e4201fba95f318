// A GPU-only build (cmake/NimbusGpuOnly.cmake) has no yaml-cpp: `nimbus train CONFIG`'s loader
// says so. The trainer itself (compile, fit on tensors, callbacks) is there.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/train/yaml_loader.h"

namespace nimbus::train {

YamlDocument load_yaml(const std::string&, const std::string& source, const YamlLimits&) {
  throw Unavailable(fmt::format("{}: this GPU-only build of nimbus reads no YAML (yaml-cpp)", source),
                    "build the trainer from the C++ API (examples/fashion_mnist_fit.cc), or use the full build");
}

}  // namespace nimbus::train
