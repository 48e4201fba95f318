#include "nimbus/tensor/tensor.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <ostream>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus {

uint64_t next_tensor_id() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

const TensorImpl& Tensor::impl() const {
  if (impl_ == nullptr) {
    throw InvalidArgument("use of an undefined tensor",
                          "a default-constructed Tensor, or a gradient that does not exist, has no shape or data");
  }
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  impl->storage = std::make_shared<Storage>(device, static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  impl->id = next_tensor_id();
  return Tensor(std::move(impl));
}

Tensor Tensor::view(std::shared_ptr<Storage> storage, size_t offset, const Shape& shape, DType dtype) {
  NIMBUS_ASSERT(storage != nullptr) << "view of null storage";
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  NIMBUS_ASSERT(offset + bytes <= storage->bytes())
      << "view of " << bytes << " bytes at offset " << offset << " overruns storage of " << storage->bytes();
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = storage->device();
  impl->storage = std::move(storage);
  impl->offset = offset;
  impl->id = next_tensor_id();
  return Tensor(std::move(impl));
}

Tensor Tensor::symbolic(const Shape& shape, DType dtype, Device device, std::shared_ptr<SymbolicValue> value) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  impl->symbolic = std::move(value);
  impl->id = next_tensor_id();
  return Tensor(std::move(impl));
}

void* Tensor::raw_data() const {
  const TensorImpl& i = impl();
  if (i.storage == nullptr) return nullptr;
  return static_cast<std::byte*>(i.storage->data()) + i.offset;
}

void Tensor::copy_from(const Tensor& src) {
  if (src.shape() != shape() || src.dtype() != dtype()) {
    throw InvalidArgument(fmt::format("copy_from: source is {} {}, destination is {} {}", dtype_name(src.dtype()),
                                      src.shape().to_string(), dtype_name(dtype()), shape().to_string()));
  }
  if (is_symbolic() || src.is_symbolic()) {
    throw InvalidArgument("copy_from: symbolic tensors have no data to copy");
  }
  Device bridge = device().is_cpu() ? src.device() : device();
  Backend& b = backend(bridge.type);
  b.copy(src.raw_data(), src.device(), raw_data(), device(), nbytes(), b.default_stream(bridge.index));
}

namespace detail {

void check_host_access(const Tensor& tensor, DType requested, const char* what) {
  if (tensor.dtype() != requested) {
    throw InvalidArgument(
        fmt::format("{}: the tensor holds {}, not {}", what, dtype_name(tensor.dtype()), dtype_name(requested)),
        "convert it first with .to(dtype)");
  }
  if (!tensor.device().is_cpu()) {
    throw InvalidArgument(fmt::format("{}: the tensor lives on {}", what, tensor.device().to_string()),
                          "copy it to the host first with .to(Device::cpu())");
  }
  if (tensor.is_symbolic()) {
    throw InvalidArgument(
        fmt::format("{}: the tensor is symbolic (inside a traced function) and has no values yet", what));
  }
}

void check_from_vector(size_t given, const Shape& shape) {
  if (static_cast<int64_t>(given) != shape.numel()) {
    throw InvalidArgument(fmt::format("from_vector: {} values given for shape {} ({} elements)", given,
                                      shape.to_string(), shape.numel()));
  }
}

void check_item(const Tensor& tensor) {
  if (tensor.numel() != 1) {
    throw InvalidArgument(fmt::format("item(): the tensor has shape {} ({} elements), not one element",
                                      tensor.shape().to_string(), tensor.numel()));
  }
}

int64_t flat_index(const Shape& shape, std::initializer_list<int64_t> index) {
  if (static_cast<int>(index.size()) != shape.rank()) {
    throw InvalidArgument(
        fmt::format("at(): {} indices given for a tensor of shape {}", index.size(), shape.to_string()));
  }
  int64_t flat = 0;
  int axis = 0;
  for (int64_t i : index) {
    const int64_t dim = shape.dims()[axis];
    if (i < -dim || i >= dim) {
      throw InvalidArgument(
          fmt::format("at(): index {} is out of range for axis {} of shape {}", i, axis, shape.to_string()));
    }
    flat = flat * dim + (i < 0 ? i + dim : i);
    ++axis;
  }
  return flat;
}

Tensor host_copy(const Tensor& tensor) {
  if (tensor.is_symbolic()) {
    throw InvalidArgument("reading values of a symbolic tensor (inside a traced function)",
                          "values exist only when the traced function runs; return the tensor from it instead");
  }
  if (tensor.device().is_cpu()) return tensor;
  return tensor.to(Device::cpu());
}

}  // namespace detail

namespace {

std::string format_element(double v, DType dtype) {
  if (dtype == DType::kBool) return v != 0 ? "true" : "false";
  if (!is_floating(dtype)) return fmt::format("{}", static_cast<int64_t>(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}

// Nested brackets like NumPy; dimensions longer than 2 * kEdge + 1 show their edges and "...".
void format_values(std::string& out, const std::vector<double>& values, const Shape& shape, DType dtype, int axis,
                   int64_t offset, int64_t stride) {
  constexpr int64_t kEdge = 3;
  if (axis == shape.rank()) {
    out += format_element(values[static_cast<size_t>(offset)], dtype);
    return;
  }
  const int64_t dim = shape.dims()[axis];
  const int64_t inner = stride / std::max<int64_t>(dim, 1);
  out += '[';
  for (int64_t i = 0; i < dim; ++i) {
    if (dim > 2 * kEdge + 1 && i == kEdge) {
      out += "..., ";
      i = dim - kEdge - 1;
      continue;
    }
    format_values(out, values, shape, dtype, axis + 1, offset + i * inner, inner);
    if (i + 1 < dim) out += ", ";
  }
  out += ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  std::string out = fmt::format("Tensor(shape={}, dtype={}, device={})", shape().to_string(), dtype_name(dtype()),
                                device().to_string());
  if (is_symbolic()) return out + " <symbolic>";
  out += ' ';
  const std::vector<double> values = to_vector<double>();
  format_values(out, values, shape(), dtype(), 0, 0, numel());
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.to_string(); }

}  // namespace nimbus
