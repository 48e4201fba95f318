// What the layer files share: argument checks, Keras's JSON forms of
// initializers and regularizers, and reading config values.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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

template <typename T>
T value_or(const nlohmann::json& config, const char* key, T fallback) {
  return config.contains(key) && !config[key].is_null() ? config[key].get<T>() : fallback;
}

template <typename T, typename... Args>
Layer make_layer(Args&&... args) {
  return Layer(std::make_shared<T>(std::forward<Args>(args)...));
}

}  // namespace nimbus::nn::internal
