#include "nimbus/ops/op_schema.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"

namespace nimbus {

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kReduction: return "reduction";
    case OpKind::kShape: return "shape";
    case OpKind::kLinalg: return "linalg";
    case OpKind::kNN: return "nn";
    case OpKind::kSource: return "source";
    case OpKind::kRandom: return "random";
  }
  return "?";
}

void InferContext::fail(const std::string& message, const std::string& hint) const {
  throw InvalidArgument(fmt::format("{}: {}", op.name, message), hint);
}

void InferContext::expect_floating(int index) const {
  const DType dtype = inputs[static_cast<size_t>(index)].dtype;
  if (!is_floating(dtype)) {
    fail(fmt::format("input {} has dtype {}, a floating dtype (f32, f64, f16, bf16) is required", index,
                     dtype_name(dtype)),
         "convert it with .to(DType::kF32)");
  }
}

void InferContext::expect_dtype(int index, std::initializer_list<DType> allowed) const {
  const DType dtype = inputs[static_cast<size_t>(index)].dtype;
  std::string names;
  for (DType d : allowed) {
    if (d == dtype) return;
    names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
  }
  fail(fmt::format("input {} has dtype {}, expected one of {}", index, dtype_name(dtype), names));
}

void InferContext::expect_same_dtype(int a, int b) const {
  const DType da = inputs[static_cast<size_t>(a)].dtype, db = inputs[static_cast<size_t>(b)].dtype;
  if (da != db) {
    fail(fmt::format("inputs {} and {} have different dtypes: {} vs {}", a, b, dtype_name(da), dtype_name(db)),
         "convert one of them with .to(dtype); Nimbus does not promote dtypes implicitly");
  }
}

void InferContext::expect_rank(int index, int rank) const {
  const Shape& shape = inputs[static_cast<size_t>(index)].shape;
  if (shape.rank() != rank) {
    fail(fmt::format("input {} has shape {} (rank {}), rank {} is required", index, shape.to_string(), shape.rank(),
                     rank));
  }
}

Tensor GradContext::grad_output(int i) const {
  const Tensor& g = grad_outputs[static_cast<size_t>(i)];
  if (g.defined()) return g;
  return zeros_like(outputs[static_cast<size_t>(i)]);
}

const std::vector<KernelDef>& OpSchema::kernels(DeviceType device, DType dtype) const {
  static const std::vector<KernelDef> kNone;
  if (device.id() >= kernel_table.size()) return kNone;
  return kernel_table[device.id()][static_cast<size_t>(dtype)];
}

std::vector<DType> OpSchema::reference_dtypes() const {
  std::vector<DType> result;
  for (DType dtype : kAllDTypes) {
    for (const KernelDef& kernel : kernels(DeviceType::kCPU, dtype)) {
      if (kernel.name == kReferenceKernel) {
        result.push_back(dtype);
        break;
      }
    }
  }
  return result;
}

}  // namespace nimbus
