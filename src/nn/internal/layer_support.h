// What the layer files share: argument checks, Keras's JSON forms of
// initializers and regularizers, and reading config values.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "nimbus/base/error.h"
#include "nimbus/nn/layer.h"

namespace nimbus::nn::internal {

// Throws InvalidArgument for an activation name Keras's vocabulary lacks (activation_table.h).
void check_activation(const std::string& activation);
// `name`, or a fresh one from `prefix` when empty.
std::string name_or(const std::string& name, const char* prefix);
void check_padding(const std::string& padding);
// Throws unless dims has this rank; `what` names the expected axes.
void check_rank(const Dims& dims, int rank, const char* what, const char* hint = "");
int64_t known_last_dim(const Dims& dims, const char* what);
// Output length of a window of `window` taps (dilated) sliding with `stride`; 0 when "valid" leaves none.
int64_t window_output(int64_t input, int64_t window, int64_t stride, const std::string& padding);

nlohmann::json initializer_to_json(const Initializer& initializer);
Initializer initializer_from_json(const nlohmann::json& json);
nlohmann::json regularizer_to_json(const Regularizer& regularizer);
Regularizer regularizer_from_json(const nlohmann::json& json);
// "float32", "int64", ... (Keras's names).
const char* keras_dtype_name(DType dtype);
// A size pair from 3 or [3, 3].
std::array<int64_t, 2> pair_of(const nlohmann::json& value);

// A layer argument missing or of the wrong type; layer_from_config puts the layer's class in front.
class ArgumentError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// config[key] as a T, checked (a JSON float is not an integer).
template <typename T>
T argument_as(const nlohmann::json& config, const char* key) {
  const nlohmann::json& value = config[key];
  const char* expected = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) expected = "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    if (!value.is_number_integer()) expected = "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) expected = "a number";
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) expected = "a string";
  }
  if (expected != nullptr) {
    throw ArgumentError(fmt::format("the argument '{}' must be {}, got {}", key, expected, value.dump()));
  }
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ArgumentError(fmt::format("the argument '{}' has the wrong form: {}", key, value.dump()));
  }
}

template <typename T>
T required(const nlohmann::json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) {
    throw ArgumentError(fmt::format("needs the argument '{}'", key), fmt::format("give it: {}: ...", key));
  }
  return argument_as<T>(config, key);
}

template <typename T>
T value_or(const nlohmann::json& config, const char* key, T fallback) {
  return config.contains(key) && !config[key].is_null() ? argument_as<T>(config, key) : fallback;
}

template <typename T, typename... Args>
Layer make_layer(Args&&... args) {
  return Layer(std::make_shared<T>(std::forward<Args>(args)...));
}

}  // namespace nimbus::nn::internal
