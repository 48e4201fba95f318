// tf.train.Example over a minimal protobuf wire-format reader and writer.
#include "nimbus/data/example.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "nimbus/base/error.h"

namespace nimbus::data {
namespace {

// Wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// Reads protobuf fields from a byte range; errors name the message being
// read and the byte offset in the whole record.
class WireReader {
 public:
  WireReader(std::string_view data, size_t base, const char* message) : data_(data), base_(base), message_(message) {}
  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) fail("a varint runs past the end");
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("a varint is longer than 10 bytes");
  }
  // (field number, wire type)
  std::pair<uint32_t, int> tag() {
    const uint64_t t = varint();
    if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff) fail(fmt::format("bad field number {}", t >> 3));
    return {static_cast<uint32_t>(t >> 3), static_cast<int>(t & 7)};
  }
  std::string_view bytes(size_t* start = nullptr) {
    const uint64_t n = varint();
    if (n > data_.size() - pos_) {
      fail(fmt::format("a field of {} bytes runs past the end ({} left)", n, data_.size() - pos_));
    }
    if (start) *start = base_ + pos_;
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint32_t fixed32() {
    if (data_.size() - pos_ < 4) fail("a fixed32 runs past the end");
    uint32_t v;
    std::memcpy(&v, data_.data() + pos_, 4);
    pos_ += 4;
    return v;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case kVarint: varint(); return;
      case kFixed64:
        if (data_.size() - pos_ < 8) fail("a fixed64 runs past the end");
        pos_ += 8;
        return;
      case kLengthDelimited: bytes(); return;
      case kFixed32: fixed32(); return;
      default: fail(fmt::format("unsupported wire type {}", wire_type));
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("tf.train.Example: malformed {} at byte offset {}: {}", message_, offset(), what),
                    "the record is not a serialized tf.train.Example, or it is corrupt");
  }

 private:
  std::string_view data_;
  size_t base_;
  const char* message_;
  size_t pos_ = 0;
};

FeatureValue decode_feature(std::string_view data, size_t base) {
  WireReader r(data, base, "Feature");
  std::optional<FeatureValue> value;
  while (!r.done()) {
    auto [field, wire] = r.tag();
    if (wire != kLengthDelimited || field < 1 || field > 3) {
      r.skip(wire);
      continue;
    }
    size_t start = 0;
    std::string_view list = r.bytes(&start);
    WireReader lr(list, start, field == 1 ? "BytesList" : field == 2 ? "FloatList" : "Int64List");
    // A oneof set twice: the last kind wins; the same kind twice merges.
    if (field == 1) {
      if (!value || !std::holds_alternative<BytesList>(*value)) value = BytesList{};
      auto& out = std::get<BytesList>(*value).values;
      while (!lr.done()) {
        auto [f, w] = lr.tag();
        if (f == 1 && w == kLengthDelimited) {
          out.emplace_back(lr.bytes());
        } else {
          lr.skip(w);
        }
      }
    } else if (field == 2) {
      if (!value || !std::holds_alternative<FloatList>(*value)) value = FloatList{};
      auto& out = std::get<FloatList>(*value).values;
      while (!lr.done()) {
        auto [f, w] = lr.tag();
        if (f == 1 && w == kLengthDelimited) {  // packed
          size_t packed_start = 0;
          std::string_view packed = lr.bytes(&packed_start);
          if (packed.size() % 4 != 0) {
            lr.fail(fmt::format("packed floats of {} bytes (not a multiple of 4)", packed.size()));
          }
          for (size_t i = 0; i < packed.size(); i += 4) {
            float v;
            std::memcpy(&v, packed.data() + i, 4);
            out.push_back(v);
          }
        } else if (f == 1 && w == kFixed32) {  // unpacked
          const uint32_t bits = lr.fixed32();
          float v;
          std::memcpy(&v, &bits, 4);
          out.push_back(v);
        } else {
          lr.skip(w);
        }
      }
    } else {
      if (!value || !std::holds_alternative<Int64List>(*value)) value = Int64List{};
      auto& out = std::get<Int64List>(*value).values;
      while (!lr.done()) {
        auto [f, w] = lr.tag();
        if (f == 1 && w == kLengthDelimited) {  // packed
          size_t packed_start = 0;
          std::string_view packed = lr.bytes(&packed_start);
          WireReader pr(packed, packed_start, "packed Int64List");
          while (!pr.done()) out.push_back(static_cast<int64_t>(pr.varint()));
        } else if (f == 1 && w == kVarint) {  // unpacked
          out.push_back(static_cast<int64_t>(lr.varint()));
        } else {
          lr.skip(w);
        }
      }
    }
  }
  if (!value) return FloatList{};  // an empty Feature: no kind set
  return *value;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, uint32_t field, int wire) { put_varint(out, (uint64_t{field} << 3) | wire); }
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

const char* type_name(FeatureType type) {
  switch (type) {
    case FeatureType::kBytes: return "bytes";
    case FeatureType::kFloat: return "float";
    case FeatureType::kInt64: return "int64";
  }
  return "?";
}

FeatureType type_of(const FeatureValue& value) {
  if (std::holds_alternative<BytesList>(value)) return FeatureType::kBytes;
  if (std::holds_alternative<FloatList>(value)) return FeatureType::kFloat;
  return FeatureType::kInt64;
}

size_t count_of(const FeatureValue& value) {
  return std::visit([](const auto& list) { return list.values.size(); }, value);
}

Tensor numbers_tensor(const FeatureValue& value, const Shape& shape) {
  if (const auto* f = std::get_if<FloatList>(&value)) {
    Tensor t = host_tensor(shape, DType::kF32);
    if (!f->values.empty()) std::memcpy(t.raw_data(), f->values.data(), f->values.size() * 4);
    return t;
  }
  const auto& v = std::get<Int64List>(value).values;
  Tensor t = host_tensor(shape, DType::kI64);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * 8);
  return t;
}

}  // namespace

std::vector<NamedFeature> decode_example(std::string_view serialized) {
  std::vector<NamedFeature> out;
  std::map<std::string, size_t> where;
  WireReader r(serialized, 0, "Example");
  while (!r.done()) {
    auto [field, wire] = r.tag();
    if (field != 1 || wire != kLengthDelimited) {
      r.skip(wire);
      continue;
    }
    size_t features_start = 0;
    std::string_view features = r.bytes(&features_start);
    WireReader fr(features, features_start, "Features");
    while (!fr.done()) {
      auto [f, w] = fr.tag();
      if (f != 1 || w != kLengthDelimited) {
        fr.skip(w);
        continue;
      }
      size_t entry_start = 0;
      std::string_view entry = fr.bytes(&entry_start);
      WireReader er(entry, entry_start, "Features map entry");
      std::string key;
      FeatureValue value = FloatList{};
      while (!er.done()) {
        auto [ef, ew] = er.tag();
        if (ef == 1 && ew == kLengthDelimited) {
          key = std::string(er.bytes());
        } else if (ef == 2 && ew == kLengthDelimited) {
          size_t value_start = 0;
          std::string_view v = er.bytes(&value_start);
          value = decode_feature(v, value_start);
        } else {
          er.skip(ew);
        }
      }
      auto it = where.find(key);
      if (it != where.end()) {
        out[it->second].value = std::move(value);  // map semantics: the last entry wins
      } else {
        where[key] = out.size();
        out.push_back({std::move(key), std::move(value)});
      }
    }
  }
  return out;
}

std::string serialize_example(const std::vector<NamedFeature>& features) {
  std::string map_entries;
  for (const auto& feature : features) {
    std::string list;
    uint32_t kind = 0;
    if (const auto* b = std::get_if<BytesList>(&feature.value)) {
      kind = 1;
      for (const auto& v : b->values) put_bytes(list, 1, v);
    } else if (const auto* f = std::get_if<FloatList>(&feature.value)) {
      kind = 2;
      if (!f->values.empty()) {
        put_bytes(list, 1, std::string_view(reinterpret_cast<const char*>(f->values.data()), f->values.size() * 4));
      }
    } else {
      kind = 3;
      const auto& values = std::get<Int64List>(feature.value).values;
      if (!values.empty()) {
        std::string packed;
        for (int64_t v : values) put_varint(packed, static_cast<uint64_t>(v));
        put_bytes(list, 1, packed);
      }
    }
    std::string feature_message;
    put_bytes(feature_message, kind, list);
    std::string entry;
    put_bytes(entry, 1, feature.name);
    put_bytes(entry, 2, feature_message);
    put_bytes(map_entries, 1, entry);
  }
  std::string example;
  put_bytes(example, 1, map_entries);
  return example;
}

Element parse_example(std::string_view serialized, const std::vector<FeatureSpec>& spec) {
  const std::vector<NamedFeature> features = decode_example(serialized);
  Element out;
  out.reserve(spec.size());
  for (const FeatureSpec& s : spec) {
    const FeatureValue* value = nullptr;
    for (const auto& f : features) {
      if (f.name == s.name) value = &f.value;
    }
    // An empty feature (no values) has no kind; treat it as the spec's kind.
    if (value != nullptr && count_of(*value) == 0 && type_of(*value) != s.type) value = nullptr;
    if (s.variable_length) {
      if (value == nullptr) {
        out.push_back(s.type == FeatureType::kBytes
                          ? string_tensor("")
                          : host_tensor(Shape{0}, s.type == FeatureType::kFloat ? DType::kF32 : DType::kI64));
        continue;
      }
    } else if (value == nullptr) {
      if (!s.default_value) {
        throw DataError(fmt::format("tf.train.Example: feature '{}' is missing and has no default", s.name),
                        "give the FeatureSpec a default_value, or use var_len");
      }
      if (s.type == FeatureType::kBytes) {
        throw InvalidArgument(fmt::format("parse_example: feature '{}': bytes features take no default", s.name));
      }
      const auto& d = *s.default_value;
      if (static_cast<int64_t>(d.size()) != s.shape.numel() && d.size() != 1) {
        throw InvalidArgument(fmt::format("parse_example: feature '{}': default has {} values, shape {} needs {}",
                                          s.name, d.size(), s.shape.to_string(), s.shape.numel()));
      }
      Tensor t = host_tensor(s.shape, s.type == FeatureType::kFloat ? DType::kF32 : DType::kI64);
      for (int64_t i = 0; i < s.shape.numel(); ++i) {
        const double v = d.size() == 1 ? d[0] : d[static_cast<size_t>(i)];
        if (s.type == FeatureType::kFloat) {
          t.data<float>()[i] = static_cast<float>(v);
        } else {
          t.data<int64_t>()[i] = static_cast<int64_t>(v);
        }
      }
      out.push_back(t);
      continue;
    }
    if (type_of(*value) != s.type) {
      throw DataError(fmt::format("tf.train.Example: feature '{}' holds a {} list, the spec asks for {}", s.name,
                                  type_name(type_of(*value)), type_name(s.type)),
                      "fix the FeatureSpec's type to match the records");
    }
    const size_t count = count_of(*value);
    if (s.type == FeatureType::kBytes) {
      const auto& values = std::get<BytesList>(*value).values;
      if (s.variable_length || s.shape.rank() == 0) {
        if (values.size() != 1 && !(s.variable_length && values.empty())) {
          throw DataError(fmt::format("tf.train.Example: bytes feature '{}' holds {} values; {} takes exactly one",
                                      s.name, values.size(), s.variable_length ? "var_len" : "shape []"),
                          "use fixed(name, kBytes, Shape{k}) for k values of equal length");
        }
        out.push_back(string_tensor(values.empty() ? std::string_view() : values[0]));
        continue;
      }
      if (s.shape.rank() != 1 || static_cast<int64_t>(values.size()) != s.shape[0]) {
        throw DataError(fmt::format("tf.train.Example: bytes feature '{}' holds {} values, the spec's shape is {}",
                                    s.name, values.size(), s.shape.to_string()));
      }
      const size_t length = values.empty() ? 0 : values[0].size();
      Tensor t = host_tensor(Shape{s.shape[0], static_cast<int64_t>(length)}, DType::kU8);
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i].size() != length) {
          throw DataError(fmt::format("tf.train.Example: bytes feature '{}': value {} has {} bytes, value 0 has {}",
                                      s.name, i, values[i].size(), length));
        }
        if (length > 0) std::memcpy(static_cast<char*>(t.raw_data()) + i * length, values[i].data(), length);
      }
      out.push_back(t);
      continue;
    }
    if (s.variable_length) {
      out.push_back(numbers_tensor(*value, Shape{static_cast<int64_t>(count)}));
      continue;
    }
    if (static_cast<int64_t>(count) != s.shape.numel()) {
      throw DataError(fmt::format("tf.train.Example: feature '{}' holds {} values, its shape {} needs {}", s.name,
                                  count, s.shape.to_string(), s.shape.numel()),
                      "fix the FeatureSpec's shape, or use var_len for a varying count");
    }
    out.push_back(numbers_tensor(*value, s.shape));
  }
  return out;
}

Element parse_example(const Tensor& serialized, const std::vector<FeatureSpec>& spec) {
  if (serialized.dtype() != DType::kU8 || serialized.rank() != 1) {
    throw InvalidArgument(fmt::format("parse_example: expected a serialized record (u8 rank 1), got {} {}",
                                      dtype_name(serialized.dtype()), serialized.shape().to_string()));
  }
  return parse_example(std::string_view(static_cast<const char*>(serialized.raw_data()), serialized.nbytes()), spec);
}

MapFn parse_example_fn(std::vector<FeatureSpec> spec) {
  return [spec = std::move(spec)](const Element& element) {
    if (element.empty()) throw InvalidArgument("parse_example: the element has no components");
    return parse_example(element[0], spec);
  };
}

}  // namespace nimbus::data
