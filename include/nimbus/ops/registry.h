// The op registry: every op's schema and kernels, filled at library load by
// static registration in src/ops/<family>.cc (schemas, reference kernels) and
// src/kernels/<backend>/ (fast kernels).
//
//   // src/ops/elementwise_binary.cc
//   const OpSchema& kAdd = define_op({.name = "add", .kind = OpKind::kElementwise, .num_inputs = 2, ...});
//   const bool kAddReference = register_kernel("add", {.name = kReferenceKernel, ...});
//
//   OpRegistry::global().get("add");   // the schema; unknown names throw NotFound
//   OpRegistry::global().ops();        // every op, sorted by name (the registry walk test uses this)
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nimbus/ops/op_schema.h"

namespace nimbus {

class OpRegistry {
 public:
  static OpRegistry& global();

  // Defines an op; the name must be new. Returns the registered schema (stable address).
  const OpSchema& define(OpSchema schema);
  // Adds a kernel to an op; the op may be defined before or after (static
  // initialization order across files is unspecified).
  void add_kernel(std::string_view op_name, const KernelDef& kernel);
  // Adds a kernel to every op, defined before or after, whose schema `serves` accepts: a kernel
  // chosen by a fact in the schema (the CPU's widened kernel serves the ops with widen_16_bit).
  void add_kernel_to_ops(std::function<bool(const OpSchema&)> serves, const KernelDef& kernel);

  const OpSchema* find(std::string_view name) const;
  const OpSchema& get(std::string_view name) const;
  // Defined ops, sorted by name.
  std::vector<const OpSchema*> ops() const;
  // Names that received kernels but were never defined (a typo in a backend).
  std::vector<std::string> orphan_kernel_names() const;

 private:
  struct Entry {
    std::unique_ptr<OpSchema> schema = std::make_unique<OpSchema>();
    bool defined = false;
  };
  struct KernelForOps {
    std::function<bool(const OpSchema&)> serves;
    KernelDef kernel;
  };
  std::map<std::string, Entry, std::less<>> entries_;
  std::vector<KernelForOps> kernels_for_ops_;
};

// The op list of docs/ops.md: a Markdown table of every op with its kind,
// dtypes, gradient and kernels (`nimbus ops` prints it).
std::string op_list_markdown();

inline const OpSchema& define_op(OpSchema schema) { return OpRegistry::global().define(std::move(schema)); }
inline bool register_kernel(std::string_view op_name, const KernelDef& kernel) {
  OpRegistry::global().add_kernel(op_name, kernel);
  return true;
}
inline bool register_kernel_for_ops(std::function<bool(const OpSchema&)> serves, const KernelDef& kernel) {
  OpRegistry::global().add_kernel_to_ops(std::move(serves), kernel);
  return true;
}

}  // namespace nimbus
