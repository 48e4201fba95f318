#include "nimbus/ops/attrs.h"

#include <fmt/format.h>

#include <functional>

#include "nimbus/base/error.h"

namespace nimbus {

Attrs::Attrs(std::initializer_list<std::pair<std::string_view, AttrValue>> entries) {
  for (const auto& [name, value] : entries) set(name, value);
}

Attrs& Attrs::set(std::string_view name, AttrValue value) {
  for (auto& entry : entries_) {
    if (entry.first == name) {
      entry.second = std::move(value);
      return *this;
    }
  }
  entries_.emplace_back(std::string(name), std::move(value));
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& entry : entries_) {
    if (entry.first == name) return &entry.second;
  }
  return nullptr;
}

template <typename T>
const T& Attrs::get(std::string_view name) const {
  const AttrValue* value = find(name);
  NIMBUS_ASSERT(value != nullptr) << "missing attribute '" << name << "' in {" << to_string() << "}";
  const T* typed = std::get_if<T>(value);
  NIMBUS_ASSERT(typed != nullptr) << "attribute '" << name << "' has another type: " << attr_value_to_string(*value);
  return *typed;
}

template const bool& Attrs::get<bool>(std::string_view) const;
template const int64_t& Attrs::get<int64_t>(std::string_view) const;
template const double& Attrs::get<double>(std::string_view) const;
template const std::string& Attrs::get<std::string>(std::string_view) const;
template const std::vector<int64_t>& Attrs::get<std::vector<int64_t>>(std::string_view) const;
template const DType& Attrs::get<DType>(std::string_view) const;
template const Shape& Attrs::get<Shape>(std::string_view) const;
template const AttrObjectPtr& Attrs::get<AttrObjectPtr>(std::string_view) const;

std::string attr_value_to_string(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, int64_t>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<V, double>) {
          return fmt::format("{:g}", v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          return fmt::format("\"{}\"", v);
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          return fmt::format("[{}]", fmt::join(v, ", "));
        } else if constexpr (std::is_same_v<V, DType>) {
          return std::string(dtype_name(v));
        } else if constexpr (std::is_same_v<V, AttrObjectPtr>) {
          return v == nullptr ? "null" : v->to_string();
        } else {
          return v.to_string();
        }
      },
      value);
}

std::string Attrs::to_string() const {
  std::string out;
  for (const auto& [name, value] : entries_) {
    if (!out.empty()) out += ", ";
    out += name + "=" + attr_value_to_string(value);
  }
  return out;
}

size_t Attrs::hash() const {
  size_t h = entries_.size();
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (const auto& [name, value] : entries_) {
    mix(std::hash<std::string>{}(name));
    mix(value.index());
    mix(std::hash<std::string>{}(attr_value_to_string(value)));
  }
  return h;
}

}  // namespace nimbus
