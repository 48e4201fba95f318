#include "nimbus/plan/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "nimbus/base/ascii_case.h"
#include "nimbus/base/error.h"

namespace nimbus::plan {
namespace {

// Reads the fields of one catalog entry, naming the file and line of whatever is wrong.
class EntryReader {
 public:
  EntryReader(const std::string& file, const YAML::Node& node, std::string section)
      : file_(file), node_(node), section_(std::move(section)) {
    if (!node_.IsMap()) fail("", "a mapping of fields");
  }

  template <typename T>
  T required(const std::string& field) const {
    const YAML::Node value = node_[field];
    if (!value.IsDefined() || value.IsNull()) {
      throw DataError(
          fmt::format("{}:{}: {} entry lacks the field '{}'", file_, node_.Mark().line + 1, section_, field),
          "every entry needs it; see the comments at the top of data/catalog/" + section_ + ".yaml");
    }
    return convert<T>(field, value);
  }

  // A field that may be absent or null (a figure nobody published).
  template <typename T>
  std::optional<T> optional(const std::string& field) const {
    const YAML::Node value = node_[field];
    if (!value.IsDefined() || value.IsNull()) return std::nullopt;
    return convert<T>(field, value);
  }

  template <typename T>
  T value_or(const std::string& field, T fallback) const {
    return optional<T>(field).value_or(std::move(fallback));
  }

  EntryReader child(const std::string& field) const {
    required<YAML::Node>(field);
    return EntryReader(file_, node_[field], section_);
  }

  // A whole-number field from 1 to `most` (a count of GPUs or cores).
  int count(const std::string& field, int most) const {
    const int value = required<int>(field);
    if (value < 1 || value > most) {
      throw DataError(fmt::format("{}:{}: field '{}' of a {} entry is {}: it should be 1 to {}", file_,
                                  node_[field].Mark().line + 1, field, section_, value, most));
    }
    return value;
  }

  int line() const { return node_.Mark().line + 1; }
  const std::string& file() const { return file_; }

 private:
  template <typename T>
  T convert(const std::string& field, const YAML::Node& value) const {
    if constexpr (std::is_same_v<T, YAML::Node>) {
      return value;
    } else {
      const char* expected = std::is_same_v<T, std::string> ? "a string" : "a number from 0 up";
      T converted{};
      try {
        converted = value.as<T>();
      } catch (const YAML::Exception&) {
        throw DataError(fmt::format("{}:{}: field '{}' of a {} entry should be {}", file_, value.Mark().line + 1, field,
                                    section_, expected));
      }
      // Every figure of a catalog (rates, sizes, prices, counts) is finite and not negative.
      if constexpr (std::is_arithmetic_v<T>) {
        if (!std::isfinite(static_cast<double>(converted)) || converted < 0) {
          throw DataError(fmt::format("{}:{}: field '{}' of a {} entry is {}: it should be {}", file_,
                                      value.Mark().line + 1, field, section_, value.Scalar(), expected));
        }
      }
      return converted;
    }
  }

  [[noreturn]] void fail(const std::string& field, const std::string& expected) const {
    throw DataError(fmt::format("{}:{}: {}{} should be {}", file_, node_.Mark().line + 1, section_,
                                field.empty() ? " entry" : " field '" + field + "'", expected));
  }

  const std::string& file_;
  YAML::Node node_;
  std::string section_;
};

GpuSpec read_gpu(const EntryReader& entry) {
  GpuSpec gpu;
  gpu.name = entry.required<std::string>("name");
  gpu.short_name = entry.value_or<std::string>("short_name", "");
  gpu.product_label = entry.required<std::string>("product_label");
  gpu.arch = entry.required<std::string>("arch");
  gpu.compute_capability = entry.required<double>("compute_capability");
  gpu.memory_gb = entry.required<double>("memory_gb");
  gpu.memory_bandwidth_gbps = entry.required<double>("memory_bandwidth_gbps");
  const EntryReader tflops = entry.child("tflops");
  gpu.tflops.fp32 = tflops.required<double>("fp32");
  gpu.tflops.tf32 = tflops.optional<double>("tf32");
  gpu.tflops.bf16 = tflops.optional<double>("bf16");
  gpu.tflops.fp16 = tflops.optional<double>("fp16");
  gpu.tflops.fp8 = tflops.optional<double>("fp8");
  gpu.matmul_efficiency = entry.optional<double>("matmul_efficiency");
  gpu.pcie_gbps = entry.required<double>("pcie_gbps");
  gpu.nvlink_gbps = entry.optional<double>("nvlink_gbps");
  gpu.tdp_w = entry.required<double>("tdp_w");
  gpu.source = entry.required<std::string>("source");
  gpu.as_of = entry.required<std::string>("as_of");
  return gpu;
}

CpuSpec read_cpu(const EntryReader& entry) {
  CpuSpec cpu;
  cpu.name = entry.required<std::string>("name");
  cpu.fp32_gflops_per_core = entry.required<double>("fp32_gflops_per_core");
  cpu.memory_bandwidth_gbps_per_core = entry.required<double>("memory_bandwidth_gbps_per_core");
  cpu.matmul_efficiency = entry.required<double>("matmul_efficiency");
  cpu.source = entry.required<std::string>("source");
  cpu.as_of = entry.required<std::string>("as_of");
  return cpu;
}

CloudSpec read_cloud(const EntryReader& entry) {
  CloudSpec cloud;
  cloud.name = ascii_lower(entry.required<std::string>("name"));
  cloud.typical_spot_discount = entry.required<double>("typical_spot_discount");
  cloud.preemption_notice_seconds = entry.required<double>("preemption_notice_seconds");
  cloud.source = entry.required<std::string>("source");
  cloud.as_of = entry.required<std::string>("as_of");
  return cloud;
}

InstanceSpec read_instance(const EntryReader& entry) {
  InstanceSpec instance;
  instance.cloud = ascii_lower(entry.required<std::string>("cloud"));
  instance.name = entry.required<std::string>("name");
  instance.gpu = entry.value_or<std::string>("gpu", "");
  if (!instance.gpu.empty()) instance.gpu_count = entry.count("gpu_count", kMaxGpusPerInstance);
  instance.cpu = entry.value_or<std::string>("cpu", "");
  if (instance.gpu.empty() == instance.cpu.empty()) {
    throw DataError(fmt::format("{}:{}: instance '{}' needs exactly one of the fields 'gpu' and 'cpu'", entry.file(),
                                entry.line(), instance.name));
  }
  instance.vcpus = entry.count("vcpus", 1 << 20);
  instance.ram_gb = entry.required<double>("ram_gb");
  instance.region = entry.required<std::string>("region");
  instance.on_demand_usd_per_hour = entry.required<double>("on_demand_usd_per_hour");
  instance.spot_usd_per_hour = entry.optional<double>("spot_usd_per_hour");
  instance.network_gbps = entry.required<double>("network_gbps");
  instance.source = entry.required<std::string>("source");
  instance.as_of = entry.required<std::string>("as_of");
  return instance;
}

// Appends `item`, replacing an earlier entry with the same key.
template <typename T, typename Key>
void upsert(std::vector<T>& items, T item, Key key) {
  auto same = std::ranges::find_if(items, [&](const T& existing) { return key(existing) == key(item); });
  if (same != items.end()) {
    *same = std::move(item);
  } else {
    items.push_back(std::move(item));
  }
}

template <typename T>
void read_section(const std::string& file, const YAML::Node& root, const std::string& section, std::vector<T>& items,
                  const std::function<T(const EntryReader&)>& read, const std::function<std::string(const T&)>& key) {
  const YAML::Node list = root[section];
  if (!list.IsDefined()) return;
  if (!list.IsSequence()) {
    throw DataError(fmt::format("{}:{}: '{}' should be a list of entries", file, list.Mark().line + 1, section));
  }
  for (const YAML::Node& node : list) upsert(items, read(EntryReader(file, node, section)), key);
}

template <typename T>
const T& find_by_name(const std::vector<T>& items, const std::string& name, const char* what) {
  for (const T& item : items) {
    if (ascii_lower(item.name) == ascii_lower(name)) return item;
  }
  std::vector<std::string> known;
  known.reserve(items.size());
  for (const T& item : items) known.push_back(item.name);
  throw NotFound(fmt::format("unknown {} '{}'; known: {}", what, name, fmt::join(known, ", ")));
}

void check_references(const Catalog& catalog) {
  for (const InstanceSpec& instance : catalog.instances) {
    try {
      catalog.cloud(instance.cloud);
      if (!instance.gpu.empty()) catalog.gpu(instance.gpu);
      if (!instance.cpu.empty()) catalog.cpu(instance.cpu);
    } catch (const NotFound& error) {
      throw DataError(fmt::format("instance {} ({}): {}", instance.name, instance.source, error.message()),
                      "add the missing entry to a catalog file, or fix the name");
    }
  }
}

}  // namespace

const GpuSpec& Catalog::gpu(const std::string& name) const {
  const std::string wanted = ascii_lower(name);
  for (const GpuSpec& spec : gpus) {
    if (ascii_lower(spec.name) == wanted) return spec;
  }
  for (const GpuSpec& spec : gpus) {
    if (!spec.short_name.empty() && ascii_lower(spec.short_name) == wanted) return spec;
  }
  throw NotFound(fmt::format("unknown GPU '{}'; known: {}", name, fmt::join(gpu_names(), ", ")));
}

const CpuSpec& Catalog::cpu(const std::string& name) const { return find_by_name(cpus, name, "CPU"); }

const CloudSpec& Catalog::cloud(const std::string& name) const { return find_by_name(clouds, name, "cloud"); }

std::vector<std::string> Catalog::gpu_names() const {
  std::vector<std::string> names;
  for (const GpuSpec& spec : gpus) {
    if (!spec.short_name.empty() && ascii_lower(spec.short_name) != ascii_lower(spec.name))
      names.push_back(spec.short_name);
    names.push_back(spec.name);
  }
  return names;
}

double Catalog::spot_usd_per_hour(const InstanceSpec& instance) const {
  if (instance.spot_usd_per_hour) return *instance.spot_usd_per_hour;
  return instance.on_demand_usd_per_hour * (1 - cloud(instance.cloud).typical_spot_discount);
}

std::string data_dir() {
  const char* override_dir = std::getenv("NIMBUS_DATA_DIR");
  return override_dir != nullptr ? override_dir : NIMBUS_SOURCE_DATA_DIR;
}

std::vector<std::string> default_catalog_files() {
  const std::filesystem::path dir = std::filesystem::path(data_dir()) / "catalog";
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  if (files.empty()) {
    throw NotFound(fmt::format("no catalog files (*.yaml) in {}", dir.string()),
                   "set NIMBUS_DATA_DIR to the folder holding catalog/, or pass --catalog FILE");
  }
  std::ranges::sort(files);
  return files;
}

namespace {

// The file's YAML, a mapping of known sections, or DataError naming the file, line and section.
YAML::Node read_catalog_file(const std::string& file) {
  const std::string remedy =
      "a catalog file maps gpus, cpus, clouds and instances to lists of entries, as "
      "data/catalog/*.yaml do (docs/planning.md)";
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw NotFound(fmt::format("{}: cannot read the catalog file", file), "check the path given to --catalog");
  } catch (const YAML::ParserException& error) {
    throw DataError(
        fmt::format("{}:{}:{}: not valid YAML ({})", file, error.mark.line + 1, error.mark.column + 1, error.msg),
        remedy);
  }
  if (root.IsNull()) return root;  // an empty file adds nothing
  if (!root.IsMap()) throw DataError(fmt::format("{}:1: the catalog file is not a mapping of sections", file), remedy);
  for (const auto& section : root) {
    const std::string name = section.first.IsScalar() ? section.first.Scalar() : "?";
    if (name != "gpus" && name != "cpus" && name != "clouds" && name != "instances") {
      throw DataError(fmt::format("{}:{}: unknown section '{}'", file, section.first.Mark().line + 1, name), remedy);
    }
  }
  return root;
}

}  // namespace

Catalog load_catalog(const std::vector<std::string>& files) {
  Catalog catalog;
  for (const std::string& file : files) {
    const YAML::Node root = read_catalog_file(file);
    if (root.IsNull()) continue;
    read_section<GpuSpec>(file, root, "gpus", catalog.gpus, read_gpu,
                          [](const GpuSpec& s) { return ascii_lower(s.name); });
    read_section<CpuSpec>(file, root, "cpus", catalog.cpus, read_cpu,
                          [](const CpuSpec& s) { return ascii_lower(s.name); });
    read_section<CloudSpec>(file, root, "clouds", catalog.clouds, read_cloud,
                            [](const CloudSpec& s) { return s.name; });
    read_section<InstanceSpec>(file, root, "instances", catalog.instances, read_instance,
                               [](const InstanceSpec& s) { return s.cloud + "/" + ascii_lower(s.name); });
  }
  check_references(catalog);
  return catalog;
}

}  // namespace nimbus::plan
