// Tensor: a dense, contiguous, row-major array with a shape, a dtype and a
// device. Copies of a Tensor share the same data (it is a reference-counted
// handle, like torch.Tensor); clone() copies the data.
//
//   Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
//   x.shape();           // [2, 3]
//   x.at<float>({1, 2});  // 6
//   Tensor y = relu(x * 2.0 - 3.0);  // ops: nimbus/ops/*.h
//   std::cout << y;      // Tensor(shape=[2, 3], dtype=f32, device=cpu:0) [[0, 1, 3], [5, 7, 9]]
//
// Element access (data<T>, at, item, to_vector) is for host code and tests:
// on a GPU it waits for the device and copies.
//
// While a function is traced into a graph (graph mode), tensors are symbolic:
// they have a shape and dtype but no storage, and reading their values is an
// error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nimbus/base/dtype.h"
#include "nimbus/base/shape.h"
#include "nimbus/device/device.h"
#include "nimbus/tensor/storage.h"

namespace nimbus {

// What a symbolic tensor stands for in a graph under construction; graph mode
// defines the concrete type.
class SymbolicValue {
 public:
  virtual ~SymbolicValue() = default;
};

struct TensorImpl {
  Shape shape;
  DType dtype = DType::kF32;
  Device device;
  std::shared_ptr<Storage> storage;  // null for symbolic tensors
  size_t offset = 0;                 // in bytes, into storage
  uint64_t id = 0;                   // unique per TensorImpl: what tapes key gradients by
  std::shared_ptr<SymbolicValue> symbolic;
};

class Tensor {
 public:
  // An undefined tensor (no shape, no data): what a missing gradient is.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialized memory of the given shape.
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
  // A view of `storage` starting `offset` bytes in; the storage must be large enough.
  static Tensor view(std::shared_ptr<Storage> storage, size_t offset, const Shape& shape, DType dtype);
  // A tensor without storage for graph mode.
  static Tensor symbolic(const Shape& shape, DType dtype, Device device, std::shared_ptr<SymbolicValue> value);

  // Copies host values into a new tensor. `values.size()` must equal shape.numel().
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
  // A rank-0 tensor.
  template <typename T>
  static Tensor scalar(T value, Device device = Device::cpu()) {
    return from_vector<T>(std::vector<T>{value}, Shape{}, device);
  }

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return impl().shape.rank(); }
  int64_t dim(int i) const { return impl().shape[i]; }
  int64_t numel() const { return impl().shape.numel(); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  uint64_t id() const { return impl().id; }
  bool is_symbolic() const { return impl().storage == nullptr; }
  const std::shared_ptr<SymbolicValue>& symbolic_value() const { return impl().symbolic; }

  // Raw device pointer (host memory for CPU tensors); null for symbolic tensors.
  void* raw_data() const;
  // Typed host pointer; the dtype must match T and the tensor must live on the CPU.
  template <typename T>
  T* data() const;

  // Host-side element reads, converting to T. These wait for the device.
  template <typename T>
  T item() const;
  template <typename T>
  T at(std::initializer_list<int64_t> index) const;
  template <typename T>
  std::vector<T> to_vector() const;

  // Same data, new shape (numel must match; one dimension may be -1).
  Tensor reshape(const Shape& shape) const;
  // New tensors with copied data.
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor clone() const;
  // Overwrites this tensor's elements with `src`'s (same shape and dtype), in place:
  // every handle to this tensor sees the new values. This is how variables update.
  void copy_from(const Tensor& src);

  // "Tensor(shape=[2, 3], dtype=f32, device=cpu:0) [[...]]", long dimensions summarized.
  std::string to_string() const;

  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_as(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  const TensorImpl& impl() const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// A new unique tensor id.
uint64_t next_tensor_id();

namespace detail {
void check_host_access(const Tensor& tensor, DType requested, const char* what);
void check_from_vector(size_t given, const Shape& shape);
void check_item(const Tensor& tensor);
int64_t flat_index(const Shape& shape, std::initializer_list<int64_t> index);
// The tensor itself on the CPU; elsewhere a host copy, after waiting for the device.
Tensor host_copy(const Tensor& tensor);
}  // namespace detail

// ---- template definitions ----

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  detail::check_from_vector(values.size(), shape);
  Tensor host = empty(shape, dtype_of<T>(), Device::cpu());
  T* dst = host.data<T>();
  for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
  // A logical CPU device other than cpu:0 gets its own tensor, so the result is on the device asked for.
  return device == Device::cpu() ? host : host.to(device);
}

template <typename T>
T* Tensor::data() const {
  detail::check_host_access(*this, dtype_of<T>(), "data<T>()");
  return static_cast<T*>(raw_data());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = detail::host_copy(*this);
  std::vector<T> result(static_cast<size_t>(numel()));
  visit_dtype(dtype(), [&]<typename S>() {
    const S* src = static_cast<const S*>(host.raw_data());
    for (size_t i = 0; i < result.size(); ++i) result[i] = from_double<T>(to_double(src[i]));
  });
  return result;
}

template <typename T>
T Tensor::item() const {
  detail::check_item(*this);
  return to_vector<T>()[0];
}

template <typename T>
T Tensor::at(std::initializer_list<int64_t> index) const {
  const int64_t flat = detail::flat_index(shape(), index);
  const Tensor host = detail::host_copy(*this);
  double value = 0;
  visit_dtype(dtype(), [&]<typename S>() { value = to_double(static_cast<const S*>(host.raw_data())[flat]); });
  return from_double<T>(value);
}

}  // namespace nimbus
