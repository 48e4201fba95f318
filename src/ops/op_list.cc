#include <fmt/format.h>

#include <set>

#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {
// A '|' inside a table cell must be escaped.
std::string escape_cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

std::string op_list_markdown() {
  std::string out =
      "# Ops\n\n"
      "Generated from the op registry by `nimbus ops` (a test checks that this file is current).\n"
      "Dtypes are those of the CPU reference kernel; kernels are listed in the order dispatch tries them.\n"
      "Precision is the op's mixed-precision rule (ops/precision.h, docs/mixed_precision.md).\n\n"
      "| op | kind | what it computes | dtypes | gradient | precision | CPU kernels |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const OpSchema* op : OpRegistry::global().ops()) {
    std::vector<std::string_view> dtypes;
    for (DType dtype : op->reference_dtypes()) dtypes.push_back(dtype_name(dtype));
    std::vector<std::string> kernels;
    std::set<std::string> seen;
    for (DType dtype : kAllDTypes) {
      for (const KernelDef& kernel : op->kernels(DeviceType::kCPU, dtype)) {
        if (seen.insert(kernel.name).second) kernels.push_back(kernel.name);
      }
    }
    std::stable_partition(kernels.begin(), kernels.end(), [](const std::string& k) { return k != kReferenceKernel; });
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} |\n", op->name, op_kind_name(op->kind),
                       escape_cell(op->summary), fmt::join(dtypes, ", "),
                       op->differentiable ? "yes" : "not differentiable",
                       op->precision ? precision_rule_name(*op->precision) : "none", fmt::join(kernels, ", "));
  }
  return out;
}

}  // namespace nimbus
