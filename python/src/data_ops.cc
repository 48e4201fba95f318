// The data pipeline's ops for nimbus.io and nimbus.image (decoding, parsing, resizing, random crops and
// flips) and nimbus.py_function: one entry point, _data_op(name, inputs, attrs). On tensors with values
// the op runs now; on the symbolic tensors of a Dataset.map being traced it is recorded as a host step
// of the ElementFunction (data/element_function.h), run later on the pipeline's threads.
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstring>
#include <random>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/element_function.h"
#include "nimbus/data/example.h"
#include "nimbus/data/image_ops.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus::python {
namespace {

using data::ComponentSpec;
using data::HostStep;
using Specs = std::span<const ComponentSpec>;

int64_t dim_or_unknown(const std::vector<int64_t>& shape, size_t axis) {
  return axis < shape.size() ? shape[axis] : -1;
}

void check_image_rank(Specs inputs, const std::string& op) {
  if (inputs[0].shape.size() != 3) {
    throw InvalidArgument(fmt::format("{}: an image has shape (H, W, C), got rank {}", op, inputs[0].shape.size()),
                          "map over single images (before batch), or unbatch first");
  }
}

HostStep read_file_step() {
  return {"read_file",
          [](std::span<const Tensor> in, uint64_t) {
            return std::vector<Tensor>{data::read_file(data::tensor_string(in[0]))};
          },
          [](Specs) {
            return std::vector<ComponentSpec>{{{-1}, DType::kU8}};
          }};
}

HostStep decode_image_step(int channels) {
  return {"decode_image",
          [channels](std::span<const Tensor> in, uint64_t) {
            return std::vector<Tensor>{data::decode_image(in[0], channels)};
          },
          [channels](Specs) {
            return std::vector<ComponentSpec>{{{-1, -1, channels == 0 ? -1 : channels}, DType::kU8}};
          }};
}

// crop_window (y, x, height, width), TensorFlow's order, read when the step runs.
HostStep decode_and_crop_step(int channels) {
  return {"decode_and_crop_jpeg",
          [channels](std::span<const Tensor> in, uint64_t) {
            const std::vector<int64_t> w = in[1].to(DType::kI64).to_vector<int64_t>();
            if (w.size() != 4) {
              throw InvalidArgument(fmt::format("decode_and_crop_jpeg: crop_window has {} values, not 4", w.size()),
                                    "pass [offset_y, offset_x, height, width]");
            }
            return std::vector<Tensor>{data::decode_and_crop_image(in[0], {w[0], w[1], w[2], w[3]}, channels)};
          },
          [channels](Specs) {
            return std::vector<ComponentSpec>{{{-1, -1, channels == 0 ? -1 : channels}, DType::kU8}};
          }};
}

HostStep decode_raw_step(DType dtype) {
  return {"decode_raw",
          [dtype](std::span<const Tensor> in, uint64_t) {
            return std::vector<Tensor>{data::decode_raw(in[0], dtype, {-1})};
          },
          [dtype](Specs inputs) {
            const int64_t bytes = dim_or_unknown(inputs[0].shape, 0);
            const auto size = static_cast<int64_t>(dtype_size(dtype));
            return std::vector<ComponentSpec>{{{bytes < 0 || bytes % size != 0 ? -1 : bytes / size}, dtype}};
          }};
}

DType dtype_of_feature(data::FeatureType type) {
  switch (type) {
    case data::FeatureType::kBytes: return DType::kU8;
    case data::FeatureType::kFloat: return DType::kF32;
    case data::FeatureType::kInt64: return DType::kI64;
  }
  return DType::kU8;
}

// features: [(name, variable_length, 'bytes'|'float'|'int64', shape, default or None)].
std::vector<data::FeatureSpec> feature_specs_of(const py::list& features) {
  std::vector<data::FeatureSpec> specs;
  for (const py::handle item : features) {
    const auto entry = item.cast<py::tuple>();
    const auto kind = entry[2].cast<std::string>();
    const data::FeatureType type = kind == "bytes"   ? data::FeatureType::kBytes
                                   : kind == "float" ? data::FeatureType::kFloat
                                                     : data::FeatureType::kInt64;
    const auto name = entry[0].cast<std::string>();
    if (entry[1].cast<bool>()) {
      specs.push_back(data::var_len(name, type));
    } else {
      const auto shape = entry[3].cast<std::vector<int64_t>>();
      std::optional<std::vector<double>> fallback;
      if (!entry[4].is_none()) fallback = entry[4].cast<std::vector<double>>();
      specs.push_back(data::fixed(name, type, Shape(std::span<const int64_t>(shape)), fallback));
    }
  }
  return specs;
}

// parse_example of each row of a rank-2 uint8 tensor (records of one length), stacked per feature.
std::vector<Tensor> parse_example_rows(const Tensor& records, const std::vector<data::FeatureSpec>& features) {
  const int64_t rows = records.dim(0);
  const auto row_bytes = static_cast<size_t>(records.dim(1));
  const auto* bytes = static_cast<const char*>(records.raw_data());
  std::vector<std::vector<Tensor>> parsed(features.size());
  for (int64_t r = 0; r < rows; ++r) {
    const data::Element element =
        data::parse_example(std::string_view(bytes + static_cast<size_t>(r) * row_bytes, row_bytes), features);
    for (size_t k = 0; k < features.size(); ++k) parsed[k].push_back(element[k]);
  }
  std::vector<Tensor> outputs;
  for (size_t k = 0; k < features.size(); ++k) {
    const Shape& shape = rows > 0 ? parsed[k][0].shape() : Shape{};
    std::vector<int64_t> dims{rows};
    for (const int64_t d : shape.dims()) dims.push_back(d);
    Tensor out = data::host_tensor(Shape(std::span<const int64_t>(dims)), dtype_of_feature(features[k].type));
    for (int64_t r = 0; r < rows; ++r) {
      const Tensor& part = parsed[k][static_cast<size_t>(r)];
      if (part.shape() != shape) {
        throw InvalidArgument(fmt::format("parse_example: feature '{}' has shape {} in record {} but {} in record 0",
                                          features[k].name, part.shape().to_string(), r, shape.to_string()),
                              "parse records whose features vary in length one at a time, with "
                              "parse_single_example before batch");
      }
      std::memcpy(static_cast<char*>(out.raw_data()) + static_cast<size_t>(r) * part.nbytes(), part.raw_data(),
                  part.nbytes());
    }
    outputs.push_back(out);
  }
  return outputs;
}

HostStep parse_example_step(const std::vector<data::FeatureSpec>& features) {
  auto infer = [features](Specs inputs) {
    std::vector<ComponentSpec> outputs;
    for (const data::FeatureSpec& feature : features) {
      std::vector<int64_t> shape;
      if (feature.variable_length) {
        shape = {-1};
      } else {
        const auto dims = feature.shape.dims();
        shape.assign(dims.begin(), dims.end());
        if (feature.type == data::FeatureType::kBytes) shape.push_back(-1);
      }
      if (inputs[0].shape.size() == 2) shape.insert(shape.begin(), inputs[0].shape[0]);
      outputs.push_back({shape, dtype_of_feature(feature.type)});
    }
    return outputs;
  };
  return {"parse_example",
          [features](std::span<const Tensor> in, uint64_t) {
            return in[0].rank() == 2 ? parse_example_rows(in[0], features) : data::parse_example(in[0], features);
          },
          std::move(infer)};
}

HostStep resize_step(int64_t height, int64_t width) {
  return {"resize",
          [height, width](std::span<const Tensor> in, uint64_t) {
            return std::vector<Tensor>{data::resize_bilinear(in[0], height, width)};
          },
          [height, width](Specs inputs) {
            check_image_rank(inputs, "resize");
            return std::vector<ComponentSpec>{{{height, width, inputs[0].shape[2]}, DType::kF32}};
          }};
}

HostStep random_crop_step(int64_t height, int64_t width) {
  return {"random_crop",
          [height, width](std::span<const Tensor> in, uint64_t seed) {
            return std::vector<Tensor>{data::random_crop(in[0], height, width, seed)};
          },
          [height, width](Specs inputs) {
            check_image_rank(inputs, "random_crop");
            return std::vector<ComponentSpec>{{{height, width, inputs[0].shape[2]}, inputs[0].dtype}};
          }};
}

// Uniform floats in [low, high) from the step's seed: each call of the map draws anew.
HostStep random_uniform_step(std::vector<int64_t> shape, double low, double high, DType dtype) {
  return {"random_uniform",
          [=](std::span<const Tensor>, uint64_t seed) {
            Tensor out = Tensor::empty(Shape(std::span<const int64_t>(shape)), DType::kF64);
            auto* values = out.data<double>();
            for (int64_t i = 0; i < out.numel(); ++i) {
              values[i] = low + (high - low) * philox_uniform_double(seed, static_cast<uint64_t>(i));
            }
            return std::vector<Tensor>{out.to(dtype)};
          },
          [=](Specs) {
            return std::vector<ComponentSpec>{{shape, dtype}};
          }};
}

// nimbus.py_function: Python under the GIL on the pipeline's thread (one call at a time).
HostStep python_function_step(py::function fn, const std::vector<DType>& dtypes) {
  return {"py_function",
          [held = held_with_gil(std::move(fn))](std::span<const Tensor> in, uint64_t) {
            const py::gil_scoped_acquire gil;
            return (*held)(std::vector<Tensor>(in.begin(), in.end())).cast<std::vector<Tensor>>();
          },
          [dtypes](Specs) {
            std::vector<ComponentSpec> outputs;
            outputs.reserve(dtypes.size());
            for (const DType dtype : dtypes) outputs.push_back({{-1}, dtype});
            return outputs;
          }};
}

// The monotonic clock (ns) when the step runs; its input only orders it after the step that made it.
// For tests that observe when a traced map's calls run (tests/python/test_data_threads.py).
HostStep clock_step() {
  return {"clock",
          [](std::span<const Tensor>, uint64_t) {
            const auto now = std::chrono::steady_clock::now().time_since_epoch();
            return std::vector<Tensor>{
                Tensor::scalar<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count())};
          },
          [](Specs) {
            return std::vector<ComponentSpec>{{{}, DType::kI64}};
          }};
}

HostStep reshape_step(std::vector<int64_t> shape) {
  return {"reshape",
          [shape](std::span<const Tensor> in, uint64_t) { return std::vector<Tensor>{reshape(in[0], shape)}; },
          [shape](Specs inputs) {
            return std::vector<ComponentSpec>{{shape, inputs[0].dtype}};
          }};
}

HostStep step_of(const std::string& name, const py::dict& attrs) {
  const auto attr = [&](const char* key) { return attrs[key]; };
  if (name == "read_file") return read_file_step();
  if (name == "decode_image") return decode_image_step(attr("channels").cast<int>());
  if (name == "decode_and_crop_jpeg") return decode_and_crop_step(attr("channels").cast<int>());
  if (name == "decode_raw") return decode_raw_step(dtype_from_python(attr("dtype")));
  if (name == "parse_example") return parse_example_step(feature_specs_of(attr("features")));
  if (name == "resize") return resize_step(attr("height").cast<int64_t>(), attr("width").cast<int64_t>());
  if (name == "random_crop") return random_crop_step(attr("height").cast<int64_t>(), attr("width").cast<int64_t>());
  if (name == "random_flip_left_right") return data::random_flip_left_right_step();
  if (name == "random_uniform") {
    return random_uniform_step(attr("shape").cast<std::vector<int64_t>>(), attr("low").cast<double>(),
                               attr("high").cast<double>(), dtype_from_python(attr("dtype")));
  }
  if (name == "clock") return clock_step();
  if (name == "py_function") {
    std::vector<DType> dtypes;
    for (const py::handle dtype : attr("dtypes").cast<py::list>()) dtypes.push_back(dtype_from_python(dtype));
    return python_function_step(attr("fn").cast<py::function>(), dtypes);
  }
  throw InvalidArgument(fmt::format("_data_op: no data op '{}'", name));
}

}  // namespace

Tensor dataset_reshape(const Tensor& tensor, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> traced = data::traced_shape(tensor);
  if (std::find(traced.begin(), traced.end(), -1) == traced.end()) return reshape(tensor, shape);
  const std::array<Tensor, 1> inputs{tensor};
  return data::record_host_step(reshape_step(shape), inputs)[0];
}

void bind_data_ops(py::module_& m) {
  m.def(
      "_data_op",
      [](const std::string& name, const std::vector<Tensor>& inputs, const py::dict& attrs) {
        const HostStep step = step_of(name, attrs);
        // Inside a dataset function every data op is recorded, on constants too: a random one must draw
        // anew for each element.
        const bool symbolic =
            std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.is_symbolic(); });
        if (symbolic || data::tracing_element_function()) return data::record_host_step(step, inputs);
        return step.run(inputs, std::random_device{}());
      },
      py::arg("name"), py::arg("inputs"), py::arg("attrs"));
  m.def(
      "_encode_jpeg", [](const Tensor& image, int quality) { return py::bytes(data::encode_jpeg(image, quality)); },
      py::arg("image"), py::arg("quality"));
  m.def("_tracing_dataset_function", &data::tracing_element_function);
  m.def("_traced_shape", [](const Tensor& t) {
    py::list dims;
    for (const int64_t d : data::traced_shape(t)) dims.append(d < 0 ? py::none() : py::cast(d));
    return py::tuple(dims);
  });
}

}  // namespace nimbus::python
