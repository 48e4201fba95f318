// tf.train.Example: parse and write the protobuf messages TensorFlow stores
// in TFRecord files, with no protobuf dependency.
//
//   std::vector<FeatureSpec> spec = {
//       fixed("image", FeatureType::kBytes),              // one bytes value -> u8 [n]
//       fixed("label", FeatureType::kInt64),              // one int64 -> i64 scalar
//       fixed("box", FeatureType::kFloat, Shape{4}),      // exactly 4 floats -> f32 [4]
//       var_len("tags", FeatureType::kInt64),             // any number -> i64 [k]
//   };
//   Element e = parse_example(record, spec);              // one tensor per spec entry, in order
//   Dataset::tfrecord(files).map(parse_example_fn(spec), kAutotune)
//
//   std::string bytes = serialize_example({{"label", Int64List{{7}}}, {"image", BytesList{{raw}}}});
//
// Schema (example.proto, feature.proto):
//   Example{ Features features = 1; }   Features{ map<string, Feature> feature = 1; }
//   Feature{ oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   BytesList{ repeated bytes value = 1; }  FloatList{ repeated float value = 1 [packed]; }
//   Int64List{ repeated int64 value = 1 [packed]; }
// Repeated numbers are accepted packed and unpacked, as any protobuf parser
// must; unknown fields are skipped; for a key given twice the last wins.
//
// A missing feature takes its default (or is a DataError naming the feature
// when it has none); a feature of the wrong kind or count is a DataError
// naming it. Bytes features are u8 tensors: a fixed-length bytes feature of
// shape [] is its one value ([n] bytes); shape [k] needs k values of equal
// length (u8 [k, n]); var_len bytes features hold at most one value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::data {

enum class FeatureType { kBytes, kFloat, kInt64 };

struct FeatureSpec {
  std::string name;
  FeatureType type = FeatureType::kFloat;
  bool variable_length = false;
  Shape shape;                                       // fixed length: the value's shape ([] = one value)
  std::optional<std::vector<double>> default_value;  // numbers; for a missing fixed-length feature
};

inline FeatureSpec fixed(std::string name, FeatureType type, Shape shape = {},
                         std::optional<std::vector<double>> default_value = std::nullopt) {
  return {std::move(name), type, false, shape, std::move(default_value)};
}
inline FeatureSpec var_len(std::string name, FeatureType type) { return {std::move(name), type, true, {}, {}}; }

struct BytesList {
  std::vector<std::string> values;
};
struct FloatList {
  std::vector<float> values;
};
struct Int64List {
  std::vector<int64_t> values;
};
using FeatureValue = std::variant<BytesList, FloatList, Int64List>;

struct NamedFeature {
  std::string name;
  FeatureValue value;
};

// Parses one serialized Example (a u8 string tensor or bytes) into one tensor
// per spec entry.
Element parse_example(std::string_view serialized, const std::vector<FeatureSpec>& spec);
Element parse_example(const Tensor& serialized, const std::vector<FeatureSpec>& spec);
// For Dataset::map: parses component 0 of each element.
MapFn parse_example_fn(std::vector<FeatureSpec> spec);

// All features of an Example, in the order they appear.
std::vector<NamedFeature> decode_example(std::string_view serialized);
// Serializes an Example (numbers packed, as TensorFlow writes them).
std::string serialize_example(const std::vector<NamedFeature>& features);

}  // namespace nimbus::data
