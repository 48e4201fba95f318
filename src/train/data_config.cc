#include "nimbus/train/data_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "nimbus/base/error.h"
#include "nimbus/base/logging.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/example.h"
#include "nimbus/data/idx.h"
#include "nimbus/data/image_ops.h"
#include "nimbus/data/tfrecord.h"
#include "token_data_config.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;
using data::Dataset;
using data::Element;

// One map op on one tensor; `seed` is the element's own (random ops only).
using TensorOp = std::function<Tensor(const Tensor&, uint64_t seed)>;

struct OpSpec {
  std::vector<std::string> arguments;  // besides `feature`
  std::vector<std::string> required;
  bool random = false;
  // From the op's arguments and its split (for split-wide options such as allow_truncated_images).
  std::function<TensorOp(const Json& arguments, const Json& split)> make;
};

std::vector<int64_t> int_list(const Json& value) { return value.get<std::vector<int64_t>>(); }

// convert_dtype: a cast, then times `scale` (u8 pixels to [0, 1] with scale 1/255).
TensorOp convert_dtype_op(const Json& a, const Json&) {
  const DType dtype = parse_dtype(a.at("dtype").get<std::string>());
  const double scale = a.value("scale", 1.0);
  return [dtype, scale](const Tensor& t, uint64_t) {
    if (scale == 1.0) return t.to(dtype);
    if (!is_floating(dtype)) {
      throw InvalidArgument(
          fmt::format("convert_dtype: scale {} needs a floating dtype, not {}", scale, dtype_name(dtype)));
    }
    Tensor f = t.to(DType::kF32);
    Tensor scaled = data::host_tensor(f.shape(), DType::kF32);
    const float* src = f.data<float>();
    float* dst = scaled.data<float>();
    // In f32, as the IDX shorthand's images * scale: the same pixels bit for bit.
    const auto factor = static_cast<float>(scale);
    for (int64_t i = 0; i < f.numel(); ++i) dst[i] = src[i] * factor;
    return scaled.to(dtype);
  };
}

const std::map<std::string, OpSpec>& map_ops() {
  static const std::map<std::string, OpSpec> ops = {
      {"decode_raw",
       {{"dtype", "shape"},
        {"dtype", "shape"},
        false,
        [](const Json& a, const Json&) -> TensorOp {
          const DType dtype = parse_dtype(a.at("dtype").get<std::string>());
          const std::vector<int64_t> shape = int_list(a.at("shape"));
          return [dtype, shape](const Tensor& t, uint64_t) { return data::decode_raw(t, dtype, shape); };
        }}},
      {"decode_image",
       {{"channels"},
        {},
        false,
        [](const Json& a, const Json& split) -> TensorOp {
          const int channels = a.value("channels", 0);
          const bool allow_truncated = split.value("allow_truncated_images", false);
          return [channels, allow_truncated](const Tensor& t, uint64_t) {
            return data::decode_image(t, channels, {}, allow_truncated);
          };
        }}},
      {"reshape",
       {{"shape"},
        {"shape"},
        false,
        [](const Json& a, const Json&) -> TensorOp {
          const Shape shape(int_list(a.at("shape")));
          return [shape](const Tensor& t, uint64_t) { return t.reshape(shape); };
        }}},
      {"convert_dtype", {{"dtype", "scale"}, {"dtype"}, false, convert_dtype_op}},
      {"normalize",
       {{"mean", "std"},
        {"mean", "std"},
        false,
        [](const Json& a, const Json&) -> TensorOp {
          const auto mean = a.at("mean").get<std::vector<float>>(), std = a.at("std").get<std::vector<float>>();
          return [mean, std](const Tensor& t, uint64_t) { return data::normalize(t, mean, std); };
        }}},
      {"resize",
       {{"height", "width"},
        {"height", "width"},
        false,
        [](const Json& a, const Json&) -> TensorOp {
          const int64_t height = a.at("height").get<int64_t>(), width = a.at("width").get<int64_t>();
          return [height, width](const Tensor& t, uint64_t) { return data::resize_bilinear(t, height, width); };
        }}},
      {"random_crop",
       {{"height", "width"},
        {"height", "width"},
        true,
        [](const Json& a, const Json&) -> TensorOp {
          const int64_t height = a.at("height").get<int64_t>(), width = a.at("width").get<int64_t>();
          return [height, width](const Tensor& t, uint64_t seed) { return data::random_crop(t, height, width, seed); };
        }}},
      {"random_flip",
       {{},
        {},
        true,
        [](const Json&, const Json&) -> TensorOp {
          return [](const Tensor& t, uint64_t seed) { return data::random_flip_left_right(t, seed); };
        }}},
  };
  return ops;
}

const std::vector<std::string> kSources = {"csv", "files", "idx", "text", "tfrecord", "tokens"};
const std::map<std::string, std::vector<std::string>> kSourceKeys = {
    {"idx", {"images", "labels"}},
    {"csv", {"files", "columns", "header", "delimiter", "allow_non_finite"}},
    {"tfrecord", {"files", "compression", "features"}},
    {"files", {"files"}}};
const std::set<std::string> kOptionalSourceKeys = {"allow_non_finite", "compression", "delimiter", "header"};
const std::vector<std::string> kCompressions = {"auto", "gzip", "none", "zlib"};
const std::vector<std::string> kFeatureKeys = {"default", "shape", "type", "var_len"};
const std::map<std::string, data::FeatureType> kFeatureTypes = {
    {"bytes", data::FeatureType::kBytes}, {"float", data::FeatureType::kFloat}, {"int64", data::FeatureType::kInt64}};
const std::map<std::string, data::CsvOptions::Type> kColumnTypes = {{"float32", data::CsvOptions::Type::kF32},
                                                                    {"float64", data::CsvOptions::Type::kF64},
                                                                    {"int32", data::CsvOptions::Type::kI32},
                                                                    {"int64", data::CsvOptions::Type::kI64},
                                                                    {"string", data::CsvOptions::Type::kString}};

template <typename Map>
std::vector<std::string> names_of(const Map& map) {
  std::vector<std::string> names;
  names.reserve(map.size());
  for (const auto& [name, value] : map) names.push_back(name);
  return names;
}

// "WHERE: unknown WHAT 'NAME'[ in PATH]", listing the valid names.
[[noreturn]] void unknown(const std::string& where, const std::string& what, const std::string& name,
                          const std::vector<std::string>& valid, const std::string& path = {}) {
  throw InvalidArgument(fmt::format("{}: unknown {} '{}'{}", where, what, name, path.empty() ? "" : " in " + path),
                        fmt::format("valid: {}", fmt::join(valid, ", ")));
}

std::string source_of(const Json& split) { return split.at("source").get<std::string>(); }

// The names of the source's components, in element order.
std::vector<std::string> source_components(const Json& split) {
  const std::string source = source_of(split);
  if (source == "idx") return {"image", "label"};
  if (source == "files") return {"image", "label", "path"};
  std::vector<std::string> names;
  if (source == "tfrecord") {
    for (const auto& [name, spec] : split.at("features").items()) names.push_back(name);
  } else {  // csv
    for (const Json& column : split.at("columns")) names.push_back(column.begin().key());
  }
  return names;
}

// Index of `name` among the components, or an error naming `path`.
size_t component_index(const std::vector<std::string>& names, const std::string& name, const std::string& path) {
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) unknown(path, "component", name, names);
  return static_cast<size_t>(it - names.begin());
}

void check_steps(const Json& split, const std::string& key, const std::string& section,
                 const std::vector<std::string>& components,
                 const std::function<std::string(const std::string&)>& where) {
  if (!split.contains(key)) return;
  const Json& steps = split.at(key);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string path = fmt::format("{}.{}[{}]", section, key, i);
    if (!steps[i].is_object() || steps[i].size() != 1) {
      throw InvalidArgument(fmt::format("{}: {} must be one 'op: {{arguments}}' entry", where(path), path),
                            fmt::format("e.g. - convert_dtype: {{dtype: float32, scale: 0.00392156862745098}}; "
                                        "ops: {}",
                                        fmt::join(names_of(map_ops()), ", ")));
    }
    const std::string op = steps[i].begin().key();
    const auto spec = map_ops().find(op);
    if (spec == map_ops().end()) unknown(where(path), "op", op, names_of(map_ops()), path);
    if (spec->second.random && key == "steps") {
      throw InvalidArgument(
          fmt::format("{}: {}.{} is random, and steps run before cache and shuffle", where(path), path, op),
          fmt::format("move it under {}.augment", section));
    }
    const Json arguments = steps[i].begin().value().is_null() ? Json::object() : steps[i].begin().value();
    if (!arguments.is_object()) {
      throw InvalidArgument(fmt::format("{}: {}.{} takes a mapping of arguments", where(path), path, op));
    }
    std::vector<std::string> valid = spec->second.arguments;
    valid.push_back("feature");
    for (const auto& [name, value] : arguments.items()) {
      if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
        unknown(where(path), "argument", name, valid, fmt::format("{}.{}", path, op));
      }
    }
    for (const std::string& name : spec->second.required) {
      if (!arguments.contains(name)) {
        throw InvalidArgument(fmt::format("{}: {}.{} needs '{}'", where(path), path, op, name),
                              fmt::format("its arguments: {}", fmt::join(valid, ", ")));
      }
    }
    component_index(components, arguments.value("feature", std::string("image")),
                    where(path) + ": " + path + ".feature");
    try {
      (void)spec->second.make(arguments, split);  // a bad dtype or a wrongly typed argument fails here, not mid-run
    } catch (const nlohmann::json::exception& error) {
      throw InvalidArgument(fmt::format("{}: {}.{}: {}", where(path), path, op, error.what()));
    } catch (const Error& error) {
      throw InvalidArgument(fmt::format("{}: {}.{}: {}", where(path), path, op, error.message()), error.hint());
    }
  }
}

// ignore_errors, allow_truncated_images, allow_non_finite: booleans; max_bad_records: a count, which only means
// something when bad records are skipped.
void check_bad_record_keys(const Json& split, const std::string& section,
                           const std::function<std::string(const std::string&)>& where) {
  for (const char* key : {"ignore_errors", "allow_truncated_images", "allow_non_finite"}) {
    if (split.contains(key) && !split[key].is_boolean()) {
      throw InvalidArgument(fmt::format("{}: {}.{} must be true or false", where(section + "." + key), section, key));
    }
  }
  if (!split.contains("max_bad_records")) return;
  const std::string path = section + ".max_bad_records";
  const Json& limit = split["max_bad_records"];
  if (!limit.is_number_integer() || limit.get<int64_t>() < 0) {
    throw InvalidArgument(fmt::format("{}: {} must be a count >= 0, got {}", where(path), path, limit.dump()));
  }
  if (!split.value("ignore_errors", false)) {
    throw InvalidArgument(fmt::format("{}: {} applies only when bad records are skipped", where(path), path),
                          fmt::format("add {}.ignore_errors: true (skip bad records, stopping after more than "
                                      "max_bad_records in one pass), or drop max_bad_records",
                                      section));
  }
}

std::vector<std::string> patterns_of(const Json& files) {
  return files.is_string() ? std::vector<std::string>{files.get<std::string>()} : files.get<std::vector<std::string>>();
}

// The files matching the split's patterns, sorted (no match is a NotFound naming the key and the pattern).
std::vector<std::string> expand(const Json& split, const std::string& section) {
  std::vector<std::string> paths;
  try {
    for (const Element& e : Dataset::list_files(patterns_of(split.at("files")), /*shuffle=*/false).collect()) {
      paths.push_back(data::tensor_string(e[0]));
    }
  } catch (const NotFound& error) {
    throw NotFound(fmt::format("{}.files: {}", section, error.message()), error.hint());
  }
  return paths;
}

data::Compression compression_of(const Json& split, const std::vector<std::string>& paths) {
  const std::string name = split.value("compression", std::string("auto"));
  if (name == "gzip") return data::Compression::kGzip;
  if (name == "zlib") return data::Compression::kZlib;
  if (name == "none") return data::Compression::kNone;
  return data::compression_from_name(paths.front());
}

std::vector<data::FeatureSpec> feature_specs(const Json& features) {
  std::vector<data::FeatureSpec> specs;
  for (const auto& [name, f] : features.items()) {
    const data::FeatureType type = kFeatureTypes.at(f.value("type", std::string("float")));
    if (f.value("var_len", false)) {
      specs.push_back(data::var_len(name, type));
      continue;
    }
    std::optional<std::vector<double>> fallback;
    if (f.contains("default")) {
      fallback = f["default"].is_array() ? f["default"].get<std::vector<double>>()
                                         : std::vector<double>{f["default"].get<double>()};
    }
    specs.push_back(data::fixed(name, type, Shape(f.value("shape", std::vector<int64_t>{})), fallback));
  }
  return specs;
}

// The origin of an element from source_dataset: its last component, after the named ones.
std::string origin_of(const Element& element) { return data::tensor_string(element.back()); }

// An error in a step on the element from `origin`, as a DataError naming the record and the step's key path
// (data.train.steps[0].decode_raw), with the step's own message and remedy.
[[noreturn]] void throw_at(const std::string& origin, const std::string& path, const Error& error) {
  throw DataError(fmt::format("{}: {}: {}", origin, path, error.message()), error.hint());
}

// The split's source: elements hold the components source_components names, then their origin, a string naming
// the file and record ("TFRecord file 'a.tfrecord', record 3 at byte offset 1234"), so that an error in any later
// step names the record it came from. The augment map, selecting x and y, drops it.
Dataset source_dataset(const Json& split, const std::string& section, int parallelism) {
  const std::string source = source_of(split);
  if (source == "idx") {
    const std::string images = split.at("images").get<std::string>(), labels = split.at("labels").get<std::string>();
    return Dataset::idx({images, labels}).enumerate().map([images](const Element& e) {
      const std::string origin = fmt::format("IDX file '{}', example {}", images, e[0].item<int64_t>());
      return Element{e[1], e[2], data::string_tensor(origin)};
    });
  }
  const std::vector<std::string> paths = expand(split, section);
  if (source == "csv") {
    data::CsvOptions options{.column_types = {},
                             .header = split.value("header", true),
                             .delimiter = split.value("delimiter", std::string(",")).at(0),
                             .column_names = source_components(split),
                             .allow_non_finite = split.value("allow_non_finite", false),
                             .with_origin = true};
    for (const Json& column : split.at("columns")) {
      options.column_types.push_back(kColumnTypes.at(column.begin().value()));
    }
    return Dataset::csv(paths, options);
  }
  if (source == "tfrecord") {
    const std::vector<data::FeatureSpec> specs = feature_specs(split.at("features"));
    return Dataset::tfrecord(paths, compression_of(split, paths), /*with_origin=*/true)
        .map(
            [specs, path = section + ".features"](const Element& e) {
              Element out;
              try {
                out = data::parse_example(e[0], specs);
              } catch (const Error& error) {
                throw DataError(fmt::format("{}: {}: {}", origin_of(e), path, error.message()),
                                fmt::format("make {} (each feature's type and shape) match the records", path));
              }
              out.push_back(e[1]);
              return out;
            },
            parallelism, true, "parse_example");
  }
  // files: the label is the index of the file's folder among the sorted folder names.
  std::set<std::string> folders;
  for (const std::string& path : paths) folders.insert(std::filesystem::path(path).parent_path().filename());
  const std::vector<std::string> classes(folders.begin(), folders.end());
  return Dataset::list_files(patterns_of(split.at("files")), /*shuffle=*/false)
      .map(
          [classes](const Element& e) {
            const std::string path = data::tensor_string(e[0]);
            const std::string folder = std::filesystem::path(path).parent_path().filename();
            const auto label = std::lower_bound(classes.begin(), classes.end(), folder) - classes.begin();
            return Element{data::read_file(path), Tensor::scalar<int64_t>(label), e[0],
                           data::string_tensor(fmt::format("file '{}'", path))};
          },
          parallelism, true, "read_file");
}

// The split's ops under `key` (steps or augment), as one function over an element from source_dataset; an error
// names the element's origin and the op's key path.
std::function<void(Element&, uint64_t)> compose(const Json& split, const std::string& section, const std::string& key,
                                                const std::vector<std::string>& components) {
  struct Op {
    size_t component;
    TensorOp run;
    std::string path;  // data.train.steps[0].decode_raw
  };
  std::vector<Op> ops;
  if (split.contains(key)) {
    const Json& steps = split.at(key);
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::string op = steps[i].begin().key();
      const Json arguments = steps[i].begin().value().is_null() ? Json::object() : steps[i].begin().value();
      ops.push_back({component_index(components, arguments.value("feature", std::string("image")), key),
                     map_ops().at(op).make(arguments, split), fmt::format("{}.{}[{}].{}", section, key, i, op)});
    }
  }
  return [ops](Element& element, uint64_t seed) {
    for (size_t i = 0; i < ops.size(); ++i) {
      try {
        // Each op draws from its own stream: the element's seed mixed with the op's place.
        element[ops[i].component] = ops[i].run(element[ops[i].component], seed * 0x9E3779B97F4A7C15ULL + i);
      } catch (const Error& error) {
        throw_at(origin_of(element), ops[i].path, error);
      }
    }
  };
}

// Bad records named in the log, per split; past this many, they are counted but no longer named one by one.
constexpr size_t kMaxLoggedBadRecords = 1000;

// What the split does with a bad record, an element whose reading, parsing or steps failed (docs/data.md, "Bad
// records"). Without ignore_errors the first one stops the run, its message naming the record and the keys that
// would skip it. With it, each one is skipped and logged (once per process: the trainer's first look at the data
// and every epoch read the same records), and more than max_bad_records in one pass stop the run.
data::ErrorHandler bad_record_policy(const Json& split, const std::string& section) {
  const bool ignore = split.value("ignore_errors", false);
  const std::optional<int64_t> limit =
      split.contains("max_bad_records") ? std::optional(split["max_bad_records"].get<int64_t>()) : std::nullopt;
  struct Logged {
    std::mutex mutex;
    std::set<std::string> messages;
  };
  auto logged = std::make_shared<Logged>();
  return [=](const Error& error, int64_t count) {
    if (!ignore) {
      const std::string skip = fmt::format(
          "skip bad records with {}.ignore_errors: true ({}.max_bad_records: N stops the run after N in one pass)",
          section, section);
      throw DataError(error.message(), error.hint().empty() ? skip : error.hint() + "; or " + skip);
    }
    if (limit && count > *limit) {
      throw DataError(fmt::format("{}: {} bad records in one pass over the data, more than {}.max_bad_records ({}); "
                                  "the last: {}",
                                  section, count, section, *limit, error.message()),
                      fmt::format("repair or remove the records the log names, or raise {}.max_bad_records", section));
    }
    std::lock_guard lock(logged->mutex);
    if (logged->messages.size() > kMaxLoggedBadRecords || !logged->messages.insert(error.message()).second) return;
    if (logged->messages.size() > kMaxLoggedBadRecords) {
      log_warning(fmt::format("{}: more than {} bad records skipped: the rest are counted, not named", section,
                              kMaxLoggedBadRecords));
      return;
    }
    log_warning(fmt::format("{}: skipped bad record ({} in this pass{}): {}", section, count,
                            limit ? fmt::format(", at most {}", *limit) : std::string(), error.message()));
  };
}

// x: one component as it is, or several scalars stacked into an f32 vector (CSV columns).
Tensor select_x(const Element& element, const std::vector<size_t>& x) {
  if (x.size() == 1) return element[x[0]];
  Tensor out = data::host_tensor(Shape({static_cast<int64_t>(x.size())}), DType::kF32);
  for (size_t i = 0; i < x.size(); ++i) {
    const Tensor& part = element[x[i]];
    if (part.numel() != 1) {
      throw InvalidArgument(fmt::format("x: stacking components needs scalars, got {}", part.shape().to_string()));
    }
    out.data<float>()[i] = part.to(DType::kF32).data<float>()[0];
  }
  return out;
}

// The split's batches (drop_remainder) and how many are read ahead (prefetch).
Dataset batch_and_prefetch(Dataset ds, const Json& split, int64_t batch_size) {
  ds = ds.batch(batch_size, split.value("drop_remainder", false));
  const Json prefetch = split.value("prefetch", Json("autotune"));
  if (prefetch == "autotune") return ds.prefetch(data::kAutotune);
  return prefetch.get<int64_t>() > 0 ? ds.prefetch(prefetch.get<int64_t>()) : ds;
}

int parallelism_of(const Json& value) {
  return value.is_null() || value == "autotune" ? data::kAutotune : value.get<int>();
}

}  // namespace

bool is_pipeline_split(const nlohmann::json& split) { return split.is_object() && split.contains("source"); }

void check_pipeline_split(const nlohmann::json& split, const std::string& section,
                          const std::function<std::string(const std::string&)>& where) {
  const std::string source = source_of(split);
  if (is_token_split(split)) {
    check_token_split(split, section, where);
    return;
  }
  if (!kSourceKeys.count(source)) unknown(where(section + ".source"), section + ".source", source, kSources);
  for (const std::string& key : kSourceKeys.at(source)) {
    if (!kOptionalSourceKeys.count(key) && !split.contains(key)) {
      throw InvalidArgument(fmt::format("{}: {} (source {}) needs '{}'", where(section), section, source, key),
                            fmt::format("a {} source takes {}", source, fmt::join(kSourceKeys.at(source), ", ")));
    }
  }
  if (split.contains("scale")) {
    throw InvalidArgument(fmt::format("{}: {}.scale is the IDX shorthand's; a pipeline scales in its steps",
                                      where(section + ".scale"), section),
                          "e.g. steps: [{convert_dtype: {dtype: float32, scale: 0.00392156862745098}}]");
  }
  for (const char* key :
       {"images", "labels", "files", "columns", "header", "delimiter", "compression", "features", "allow_non_finite"}) {
    const std::vector<std::string>& allowed = kSourceKeys.at(source);
    if (split.contains(key) && std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw InvalidArgument(
          fmt::format("{}: {}.{} does not apply to source {}", where(section + "." + key), section, key, source),
          fmt::format("a {} source takes {}", source, fmt::join(allowed, ", ")));
    }
  }
  if (source == "tfrecord") {
    const std::string compression = split.value("compression", std::string("auto"));
    if (std::find(kCompressions.begin(), kCompressions.end(), compression) == kCompressions.end()) {
      unknown(where(section + ".compression"), section + ".compression", compression, kCompressions);
    }
    const Json& features = split.at("features");
    if (!features.is_object() || features.empty()) {
      throw InvalidArgument(fmt::format("{}: {}.features must map feature names to {{type, shape}}",
                                        where(section + ".features"), section),
                            "e.g. features: {image: {type: bytes}, label: {type: int64}}");
    }
    for (const auto& [name, f] : features.items()) {
      const std::string path = fmt::format("{}.features.{}", section, name);
      if (!f.is_object()) throw InvalidArgument(fmt::format("{}: {} must be a mapping", where(path), path));
      for (const auto& [key, value] : f.items()) {
        if (std::find(kFeatureKeys.begin(), kFeatureKeys.end(), key) == kFeatureKeys.end()) {
          unknown(where(fmt::format("{}.{}", path, key)), "key", key, kFeatureKeys, path);
        }
      }
      const std::string type = f.value("type", std::string("float"));
      if (!kFeatureTypes.count(type)) unknown(where(path + ".type"), path + ".type", type, names_of(kFeatureTypes));
    }
  }
  if (source == "csv") {
    const Json& columns = split.at("columns");
    for (size_t i = 0; i < columns.size(); ++i) {
      const std::string path = fmt::format("{}.columns[{}]", section, i);
      if (!columns[i].is_object() || columns[i].size() != 1 || !columns[i].begin().value().is_string()) {
        throw InvalidArgument(fmt::format("{}: {} must be one 'name: type' entry", where(path), path),
                              fmt::format("types: {}", fmt::join(names_of(kColumnTypes), ", ")));
      }
      const std::string type = columns[i].begin().value();
      if (!kColumnTypes.count(type)) unknown(where(path), path + " type", type, names_of(kColumnTypes));
    }
  }
  check_bad_record_keys(split, section, where);
  const std::vector<std::string> components = source_components(split);
  check_steps(split, "steps", section, components, where);
  check_steps(split, "augment", section, components, where);
  const Json x = split.value("x", Json("image"));
  for (const Json& name : x.is_array() ? x : Json::array({x})) {
    component_index(components, name.get<std::string>(), fmt::format("{}: {}.x", where(section + ".x"), section));
  }
  component_index(components, split.value("y", std::string("label")), where(section + ".y") + ": " + section + ".y");
}

int64_t split_example_count(const nlohmann::json& split, const std::string& section) {
  if (!is_pipeline_split(split)) return data::read_idx(split.at("labels").get<std::string>()).dim(0);
  if (is_token_split(split)) return token_windows_from_config(split, section, expand(split, section)).cardinality();
  // A TFRecord source's records alone: parsing them does not change how many there are.
  const std::vector<std::string> paths =
      source_of(split) == "tfrecord" ? expand(split, section) : std::vector<std::string>{};
  const Dataset source =
      paths.empty() ? source_dataset(split, section, 1) : Dataset::tfrecord(paths, compression_of(split, paths));
  if (const int64_t known = source.cardinality(); known >= 0) return known;
  const Dataset records = source.ignore_errors(bad_record_policy(split, section));
  int64_t count = 0;
  for (data::Iterator it = records.iterator(); it.next();) ++count;
  return count;
}

data::Dataset dataset_from_config(const nlohmann::json& split, const std::string& section, int64_t batch_size,
                                  uint64_t seed) {
  check_pipeline_split(split, section, [](const std::string& path) { return path; });
  const int parallelism = parallelism_of(split.value("num_parallel_calls", Json()));
  const uint64_t split_seed = split.contains("seed") ? split["seed"].get<uint64_t>() : seed;
  const int64_t shuffle = split.value("shuffle", int64_t{0});
  if (is_token_split(split)) {
    Dataset windows = token_windows_from_config(split, section, expand(split, section));
    if (shuffle > 0) windows = windows.shuffle(shuffle, split_seed);
    return batch_and_prefetch(windows, split, batch_size);
  }
  const std::vector<std::string> components = source_components(split);
  Dataset ds = source_dataset(split, section, parallelism);
  if (split.contains("steps") && !split["steps"].empty()) {
    ds = ds.map(
        [steps = compose(split, section, "steps", components)](const Element& e) {
          Element out = e;
          steps(out, 0);
          return out;
        },
        parallelism, true, "steps");
  }
  const Json cache = split.value("cache", Json(false));
  if (cache.is_string()) ds = ds.cache(cache.get<std::string>());
  if (cache == true) ds = ds.cache();
  if (shuffle > 0) ds = ds.shuffle(shuffle, split_seed);
  // The element's index after shuffle seeds its random ops: another image each epoch.
  std::vector<size_t> x;
  const Json x_names = split.value("x", Json("image"));
  for (const Json& name : x_names.is_array() ? x_names : Json::array({x_names})) {
    x.push_back(component_index(components, name.get<std::string>(), section + ".x"));
  }
  const size_t y = component_index(components, split.value("y", std::string("label")), section + ".y");
  ds = ds.enumerate().map(
      [augment = compose(split, section, "augment", components), x, y, split_seed,
       x_path = section + ".x"](const Element& e) {
        Element element(e.begin() + 1, e.end());
        augment(element, split_seed ^ static_cast<uint64_t>(e[0].item<int64_t>()) * 0xBF58476D1CE4E5B9ULL);
        try {
          return Element{select_x(element, x), element[y]};  // the origin stays behind
        } catch (const Error& error) {
          throw_at(origin_of(element), x_path, error);
        }
      },
      split.contains("augment") ? parallelism : 1, true, "augment");
  // Last before batch, so that it sees every bad record: unreadable, unparsable, or failing a step.
  ds = ds.ignore_errors(bad_record_policy(split, section));
  return batch_and_prefetch(ds, split, batch_size);
}

void resolve_validation_split(nlohmann::json& data_section,
                              const std::function<std::string(const std::string&)>& where) {
  if (!data_section.contains("train") || !data_section["train"].is_object() ||
      !data_section["train"].contains("validation_split") || !is_token_split(data_section["train"])) {
    return;
  }
  apply_validation_split(data_section, expand(data_section["train"], "data.train"), where);
}

}  // namespace nimbus::train
