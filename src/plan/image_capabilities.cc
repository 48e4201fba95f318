#include "nimbus/plan/image_capabilities.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "nimbus/base/error.h"
#include "nimbus/plan/catalog.h"

namespace nimbus::plan {
namespace {

constexpr const char* kRemedy =
    "see the comments of deploy/image.yaml (docs/planning.md, \"The image's capabilities\")";

YAML::Node load(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw NotFound(fmt::format("{}: cannot read the image's capabilities", path),
                   "give --image-capabilities FILE, or run from a checkout holding deploy/image.yaml");
  } catch (const YAML::ParserException& error) {
    throw DataError(
        fmt::format("{}:{}:{}: not valid YAML ({})", path, error.mark.line + 1, error.mark.column + 1, error.msg),
        kRemedy);
  }
}

// The field as T, or DataError naming the file, the line and the field.
template <typename T>
T field(const std::string& path, const YAML::Node& root, const char* key, const char* expected) {
  const YAML::Node value = root[key];
  if (!value) throw DataError(fmt::format("{}: lacks the key '{}'", path, key), kRemedy);
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    throw DataError(fmt::format("{}:{}: '{}' should be {}", path, value.Mark().line + 1, key, expected), kRemedy);
  }
}

// The nearest deploy/image.yaml in `folder` or above it, or empty.
std::string nearest_above(std::filesystem::path folder) {
  std::error_code error;
  folder = std::filesystem::absolute(folder, error);
  for (; !folder.empty(); folder = folder.parent_path()) {
    const std::filesystem::path candidate = folder / "deploy" / "image.yaml";
    if (std::filesystem::is_regular_file(candidate, error)) return candidate.string();
    if (folder == folder.parent_path()) break;
  }
  return {};
}

}  // namespace

bool ImageCapabilities::runs_on(double compute_capability) const {
  const int code = static_cast<int>(std::lround(compute_capability * 10));
  return cuda && std::ranges::find(cuda_architectures, code) != cuda_architectures.end();
}

ImageCapabilities load_image_capabilities(const std::string& path) {
  const YAML::Node root = load(path);
  if (!root.IsMap()) throw DataError(fmt::format("{}: should be a mapping of capabilities", path), kRemedy);
  static const std::vector<std::string> keys = {"cuda", "cuda_architectures", "cudnn", "nccl", "mpi"};
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    if (std::ranges::find(keys, key) == keys.end()) {
      throw DataError(fmt::format("{}:{}: unknown key '{}'", path, entry.first.Mark().line + 1, key),
                      "the keys are cuda, cuda_architectures, cudnn, nccl and mpi");
    }
  }
  ImageCapabilities image{.cuda = field<bool>(path, root, "cuda", "true or false"),
                          .cuda_architectures = field<std::vector<int>>(path, root, "cuda_architectures",
                                                                        "a list of compute capabilities: [80, 86]"),
                          .cudnn = field<bool>(path, root, "cudnn", "true or false"),
                          .nccl = field<bool>(path, root, "nccl", "true or false"),
                          .mpi = field<bool>(path, root, "mpi", "true or false"),
                          .source = path};
  return image;
}

std::string default_image_capabilities_path(const std::string& config_path) {
  std::string found;
  if (!config_path.empty()) found = nearest_above(std::filesystem::path(config_path).parent_path());
  if (found.empty()) found = nearest_above(std::filesystem::current_path());
  if (found.empty()) {
    const std::filesystem::path source = std::filesystem::path(data_dir()).parent_path() / "deploy" / "image.yaml";
    if (std::filesystem::is_regular_file(source)) found = source.string();
  }
  if (found.empty()) {
    throw NotFound("no deploy/image.yaml above the config's folder or the working directory, nor in the source tree",
                   "give --image-capabilities FILE: what the container image's nimbus can run (docs/planning.md)");
  }
  return found;
}

}  // namespace nimbus::plan
