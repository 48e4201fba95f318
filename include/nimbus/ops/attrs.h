// Attributes: the non-tensor arguments of an op call (axes, flags, sizes,
// dtypes). Graph mode stores them on nodes, prints them and hashes them for
// common-subexpression elimination.
//
//   Attrs attrs{{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", true}};
//   attrs.get_ints("axes");      // {0, 1}
//   attrs.get_bool("keepdims");  // true
//   attrs.to_string();           // "axes=[0, 1], keepdims=true"
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "nimbus/base/dtype.h"
#include "nimbus/base/shape.h"

namespace nimbus {

// A structured attribute an op defines itself (a fused op's expression
// program): printable, and compared by its printed form.
class AttrObject {
 public:
  virtual ~AttrObject() = default;
  virtual std::string to_string() const = 0;
};
using AttrObjectPtr = std::shared_ptr<const AttrObject>;

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, DType, Shape, AttrObjectPtr>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string_view, AttrValue>> entries);

  // Adds or replaces an attribute.
  Attrs& set(std::string_view name, AttrValue value);
  bool has(std::string_view name) const { return find(name) != nullptr; }

  // Typed reads. A missing attribute or a wrong type is an internal error:
  // the op's own code sets its attributes.
  bool get_bool(std::string_view name) const { return get<bool>(name); }
  int64_t get_int(std::string_view name) const { return get<int64_t>(name); }
  double get_float(std::string_view name) const { return get<double>(name); }
  const std::string& get_string(std::string_view name) const { return get<std::string>(name); }
  const std::vector<int64_t>& get_ints(std::string_view name) const { return get<std::vector<int64_t>>(name); }
  DType get_dtype(std::string_view name) const { return get<DType>(name); }
  const Shape& get_shape(std::string_view name) const { return get<Shape>(name); }
  const AttrObjectPtr& get_object(std::string_view name) const { return get<AttrObjectPtr>(name); }

  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  std::string to_string() const;
  size_t hash() const;
  bool operator==(const Attrs& other) const { return to_string() == other.to_string(); }

 private:
  const AttrValue* find(std::string_view name) const;
  template <typename T>
  const T& get(std::string_view name) const;

  std::vector<std::pair<std::string, AttrValue>> entries_;
};

std::string attr_value_to_string(const AttrValue& value);

}  // namespace nimbus
