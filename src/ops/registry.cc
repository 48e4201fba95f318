#include "nimbus/ops/registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/error.h"

namespace nimbus {

OpRegistry& OpRegistry::global() {
  static OpRegistry registry;
  return registry;
}

const OpSchema& OpRegistry::define(OpSchema schema) {
  NIMBUS_ASSERT(!schema.name.empty()) << "op without a name";
  NIMBUS_ASSERT(schema.infer != nullptr) << "op '" << schema.name << "' has no shape rule";
  NIMBUS_ASSERT(schema.differentiable == (schema.gradient != nullptr))
      << "op '" << schema.name << "' must have a gradient rule or be marked not differentiable, not both or neither";
  auto it = entries_.find(schema.name);
  if (it == entries_.end()) it = entries_.emplace(schema.name, Entry{}).first;
  Entry& entry = it->second;
  NIMBUS_ASSERT(!entry.defined) << "op '" << schema.name << "' defined twice";
  // Kernels registered before the definition stay.
  schema.kernel_table = std::move(entry.schema->kernel_table);
  *entry.schema = std::move(schema);
  entry.defined = true;
  for (const KernelForOps& rule : kernels_for_ops_) {
    if (rule.serves(*entry.schema)) add_kernel(entry.schema->name, rule.kernel);
  }
  return *entry.schema;
}

void OpRegistry::add_kernel_to_ops(std::function<bool(const OpSchema&)> serves, const KernelDef& kernel) {
  for (const OpSchema* op : ops()) {
    if (serves(*op)) add_kernel(op->name, kernel);
  }
  kernels_for_ops_.push_back({std::move(serves), kernel});
}

void OpRegistry::add_kernel(std::string_view op_name, const KernelDef& kernel) {
  NIMBUS_ASSERT(kernel.fn != nullptr) << "kernel '" << kernel.name << "' of op '" << op_name << "' has no function";
  auto it = entries_.find(op_name);
  if (it == entries_.end()) it = entries_.emplace(std::string(op_name), Entry{}).first;
  auto& tables = it->second.schema->kernel_table;
  if (tables.size() <= kernel.device.id()) tables.resize(kernel.device.id() + 1);
  auto& table = tables[kernel.device.id()];
  for (DType dtype : kernel.dtypes) {
    auto& list = table[static_cast<size_t>(dtype)];
    for (const KernelDef& existing : list) {
      NIMBUS_ASSERT(existing.name != kernel.name)
          << "kernel '" << kernel.name << "' registered twice for op '" << op_name << "' and " << dtype_name(dtype);
    }
    list.push_back(kernel);
    std::stable_sort(list.begin(), list.end(),
                     [](const KernelDef& a, const KernelDef& b) { return a.priority > b.priority; });
  }
}

const OpSchema* OpRegistry::find(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || !it->second.defined) return nullptr;
  return it->second.schema.get();
}

const OpSchema& OpRegistry::get(std::string_view name) const {
  const OpSchema* schema = find(name);
  if (schema == nullptr) throw NotFound(fmt::format("no op named '{}'", name), "docs/ops.md lists every op");
  return *schema;
}

std::vector<const OpSchema*> OpRegistry::ops() const {
  std::vector<const OpSchema*> result;
  for (const auto& [name, entry] : entries_) {
    if (entry.defined) result.push_back(entry.schema.get());
  }
  return result;
}

std::vector<std::string> OpRegistry::orphan_kernel_names() const {
  std::vector<std::string> result;
  for (const auto& [name, entry] : entries_) {
    if (!entry.defined) result.push_back(name);
  }
  return result;
}

}  // namespace nimbus
