// DLPack (Debian's libdlpack-dev, version 0.6): Tensor.__dlpack__ / __dlpack_device__ and
// from_dlpack / to_dlpack (TensorFlow's nimbus.experimental.dlpack names), zero-copy both ways for
// CPU tensors: NumPy's np.from_dlpack and PyTorch's torch.from_dlpack see a Nimbus tensor's memory,
// and a tensor made from their capsules is a view of theirs. bfloat16 crosses as DLPack's bfloat16.
#include <dlpack/dlpack.h>
#include <fmt/format.h>

#include <vector>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/tensor/storage.h"

namespace nimbus::python {
namespace {

// The names the DLPack capsule protocol gives a capsule before and after a consumer takes it.
constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
// DLPack 0.8's code for bool, which 0.6 lacks: newer producers (NumPy >= 1.25, PyTorch >= 2.0) use it.
constexpr uint8_t kDLBoolCode = 6;

DLDataType dl_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {kDLFloat, 32, 1};
    case DType::kF64: return {kDLFloat, 64, 1};
    case DType::kF16: return {kDLFloat, 16, 1};
    case DType::kBF16: return {kDLBfloat, 16, 1};
    case DType::kI32: return {kDLInt, 32, 1};
    case DType::kI64: return {kDLInt, 64, 1};
    case DType::kU8: return {kDLUInt, 8, 1};
    case DType::kBool: break;
  }
  throw InvalidArgument(fmt::format("a {} tensor cannot cross DLPack 0.6, which has no bool dtype", dtype_name(dtype)),
                        "cast it to uint8 with nimbus.cast first");
}

DType dtype_of_dl(const DLDataType& type) {
  if (type.lanes == 1) {
    if (type.code == kDLFloat && type.bits == 32) return DType::kF32;
    if (type.code == kDLFloat && type.bits == 64) return DType::kF64;
    if (type.code == kDLFloat && type.bits == 16) return DType::kF16;
    if (type.code == kDLBfloat && type.bits == 16) return DType::kBF16;
    if (type.code == kDLInt && type.bits == 32) return DType::kI32;
    if (type.code == kDLInt && type.bits == 64) return DType::kI64;
    if (type.code == kDLUInt && type.bits == 8) return DType::kU8;
    if (type.code == kDLBoolCode && type.bits == 8) return DType::kBool;
  }
  throw InvalidArgument(
      fmt::format("DLPack dtype (code {}, {} bits, {} lanes) has no nimbus dtype", type.code, type.bits, type.lanes),
      "convert it to float32, float64, float16, bfloat16, int32, int64, uint8 or bool before exporting");
}

// What a DLManagedTensor made from a Nimbus tensor owns: the tensor (its memory stays alive) and the
// shape and strides arrays DLTensor points to.
struct ExportedTensor {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

DLManagedTensor* export_tensor(const Tensor& tensor) {
  if (tensor.is_symbolic()) {
    throw InvalidArgument(
        fmt::format("a symbolic tensor (shape {}) has no memory to share through DLPack", tensor.shape().to_string()),
        "return the tensor from the nimbus.function and share the result");
  }
  if (!tensor.device().is_cpu()) {
    throw Unimplemented(fmt::format("DLPack export of a tensor on {} (CPU tensors only)", tensor.device().to_string()),
                        "move it to the CPU first with nimbus.identity under a CPU device scope");
  }
  const auto dims = tensor.shape().dims();
  auto* exported = new ExportedTensor{tensor, {dims.begin(), dims.end()}, {}, {}};
  exported->strides.resize(exported->shape.size());
  int64_t stride = 1;
  for (size_t i = exported->shape.size(); i-- > 0;) {
    exported->strides[i] = stride;
    stride *= exported->shape[i];
  }
  DLTensor& dl = exported->managed.dl_tensor;
  dl.data = tensor.raw_data();
  dl.device = {kDLCPU, 0};
  dl.ndim = tensor.rank();
  dl.dtype = dl_dtype_of(tensor.dtype());
  dl.shape = exported->shape.data();
  dl.strides = exported->strides.data();
  dl.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = [](DLManagedTensor* self) { delete static_cast<ExportedTensor*>(self->manager_ctx); };
  return &exported->managed;
}

py::capsule capsule_of(const Tensor& tensor) {
  DLManagedTensor* managed = export_tensor(tensor);
  // A capsule no consumer took still owns the tensor; a consumer renames it and calls the deleter itself.
  return py::capsule(managed, kCapsuleName, [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, kCapsuleName)) {
      auto* unused = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
      unused->deleter(unused);
    }
  });
}

bool is_compact_row_major(const DLTensor& dl) {
  if (dl.strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = dl.ndim; i-- > 0;) {
    if (dl.shape[i] != 1 && dl.strides[i] != expected) return false;
    expected *= dl.shape[i];
  }
  return true;
}

// A tensor viewing a DLPack capsule's memory; the producer's deleter runs when the tensor's storage goes.
Tensor import_capsule(const py::capsule& capsule) {
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    throw InvalidArgument("from_dlpack: the capsule was already consumed or is not a DLPack capsule",
                          "pass the object itself (a NumPy array, a torch.Tensor) or a fresh __dlpack__() capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  const DLTensor& dl = managed->dl_tensor;
  const auto refuse = [&](const std::string& message, const std::string& hint) {
    managed->deleter(managed);  // the capsule is ours from here: release it before raising
    PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
    throw InvalidArgument(message, hint);
  };
  if (dl.device.device_type != kDLCPU) {
    refuse(fmt::format("from_dlpack: memory on DLPack device type {} (CPU memory only)",
                       static_cast<int>(dl.device.device_type)),
           "copy it to the CPU first (torch: .cpu())");
  }
  std::vector<int64_t> dims(dl.shape, dl.shape + dl.ndim);
  if (!is_compact_row_major(dl)) {
    refuse(fmt::format("from_dlpack: a strided (non-contiguous) tensor of shape {}", Shape(dims).to_string()),
           "make it contiguous first (torch: .contiguous(), NumPy: np.ascontiguousarray)");
  }
  DType dtype = DType::kF32;
  try {
    dtype = dtype_of_dl(dl.dtype);
  } catch (const Error& error) {
    refuse(error.message(), error.hint());
  }
  PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
  const Shape shape(dims);
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  auto release = [managed] {
    if (!Py_IsInitialized()) return;  // at interpreter exit the producer is gone with everything else
    py::gil_scoped_acquire gil;       // NumPy's deleter drops a Python reference
    if (managed->deleter != nullptr) managed->deleter(managed);
  };
  auto storage =
      std::make_shared<Storage>(Device::cpu(), static_cast<char*>(dl.data) + dl.byte_offset, bytes, std::move(release));
  return Tensor::view(std::move(storage), 0, shape, dtype);
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor.def(
      "__dlpack__",
      [](const Tensor& t, const py::object& stream) {
        if (!stream.is_none()) {
          throw InvalidArgument("__dlpack__: a stream was given for a CPU tensor", "pass stream=None for CPU tensors");
        }
        return capsule_of(t);
      },
      py::arg("stream") = py::none());
  tensor.def("__dlpack_device__", [](const Tensor& t) {
    if (!t.device().is_cpu())
      throw Unimplemented("DLPack of a tensor on " + t.device().to_string(), "CPU tensors only");
    return py::make_tuple(static_cast<int>(kDLCPU), 0);
  });
  m.def(
      "to_dlpack", [](const py::handle& value) { return capsule_of(to_tensor(value)); }, py::arg("tf_tensor"));
  m.def(
      "from_dlpack",
      [](const py::object& dlcapsule) {
        if (py::isinstance<py::capsule>(dlcapsule)) return import_capsule(dlcapsule);
        if (!py::hasattr(dlcapsule, "__dlpack__")) {
          throw InvalidArgument(
              fmt::format("from_dlpack: a {} is neither a DLPack capsule nor has __dlpack__",
                          py::str(dlcapsule.get_type()).cast<std::string>()),
              "pass a NumPy array, a torch.Tensor or another object with __dlpack__, or a capsule from to_dlpack");
        }
        return import_capsule(dlcapsule.attr("__dlpack__")());
      },
      py::arg("dlcapsule"));
}

}  // namespace nimbus::python
