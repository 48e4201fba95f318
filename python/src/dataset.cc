// The C++ input pipeline (data/dataset.h) behind nimbus.data.Dataset (python/nimbus/data/), which keeps
// each element's nesting and spec and hands the engine flat lists of tensors.
//
// Maps and filters take an ElementFunction (data/element_function.h): the Python function traced once,
// replayed on the pipeline's threads with no Python and no GIL. Only from_generator, flat_map's and
// interleave's functions (which build datasets) and py_function steps call Python while the pipeline
// runs: they take the GIL for each call. Iterator.next releases the GIL while it waits.
#include "nimbus/data/dataset.h"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/data/element_function.h"

namespace nimbus::python {
namespace {

using data::ComponentSpec;
using data::Dataset;
using data::Element;
using data::ElementFunction;

data::Compression compression_of(const std::string& name) {
  if (name.empty() || name == "NONE") return data::Compression::kNone;
  if (name == "GZIP") return data::Compression::kGzip;
  if (name == "ZLIB") return data::Compression::kZlib;
  throw InvalidArgument(fmt::format("compression_type '{}' is not one of '', 'GZIP', 'ZLIB'", name),
                        "pass compression_type='GZIP' for .gz files, or None");
}

std::vector<ComponentSpec> specs_of(const py::list& specs) {
  std::vector<ComponentSpec> result;
  for (const py::handle spec : specs) {
    const auto pair = spec.cast<py::tuple>();
    result.push_back({pair[0].cast<std::vector<int64_t>>(), dtype_from_python(pair[1])});
  }
  return result;
}

py::list python_specs(const std::vector<ComponentSpec>& specs) {
  py::list result;
  for (const ComponentSpec& spec : specs) result.append(py::make_tuple(py::cast(spec.shape), py::cast(spec.dtype)));
  return result;
}

// A Python function returning a flat list of tensors (or a Dataset), called on pipeline threads.
template <typename Result>
std::function<Result(const Element&)> python_element_fn(py::function fn) {
  return [held = held_with_gil(std::move(fn))](const Element& element) {
    const py::gil_scoped_acquire gil;
    return (*held)(element).template cast<Result>();
  };
}

data::GeneratorFactory python_generator(py::function make_generator) {
  return [held = held_with_gil(std::move(make_generator))]() -> data::GeneratorFn {
    const py::gil_scoped_acquire gil;
    std::shared_ptr<py::object> next = held_with_gil((*held)());
    return [next]() -> std::optional<Element> {
      const py::gil_scoped_acquire gil;
      const py::object element = (*next)();
      if (element.is_none()) return std::nullopt;
      return element.cast<Element>();
    };
  };
}

}  // namespace

void bind_dataset(py::module_& m) {
  py::module_ d = m.def_submodule("_data", "The input pipeline; use nimbus.data.");
  d.attr("AUTOTUNE") = data::kAutotune;
  d.attr("INFINITE_CARDINALITY") = data::kInfiniteCardinality;
  d.attr("UNKNOWN_CARDINALITY") = data::kUnknownCardinality;

  py::class_<ElementFunction>(d, "ElementFunction")
      .def(py::init([](py::function body, const py::list& specs, const std::string& name) {
             return ElementFunction::trace(
                 [&body](const std::vector<Tensor>& inputs) { return body(inputs).cast<std::vector<Tensor>>(); },
                 specs_of(specs), name);
           }),
           py::arg("body"), py::arg("specs"), py::arg("name"))
      .def_property_readonly("output_specs", [](const ElementFunction& fn) { return python_specs(fn.output_specs()); })
      .def("__call__",
           [](const ElementFunction& fn, const Element& element) {
             const py::gil_scoped_release release;
             return fn(element);
           })
      .def("to_text", &ElementFunction::to_text);

  py::class_<data::Iterator>(d, "Iterator")
      .def("next",
           [](data::Iterator& iterator) {
             const py::gil_scoped_release release;
             return iterator.next();
           })
      .def("stats", &data::Iterator::stats);

  py::class_<Dataset>(d, "Dataset")
      .def_static("from_tensors", &Dataset::from_tensors, py::arg("components"))
      .def_static("from_tensor_slices", &Dataset::from_tensor_slices, py::arg("components"))
      .def_static("range", py::overload_cast<int64_t, int64_t, int64_t>(&Dataset::range), py::arg("start"),
                  py::arg("stop"), py::arg("step"))
      .def_static("text_line", &Dataset::text_line, py::arg("paths"))
      .def_static("list_files", &Dataset::list_files, py::arg("patterns"), py::arg("shuffle"), py::arg("seed"))
      .def_static(
          "tfrecord",
          [](std::vector<std::string> paths, const std::string& compression) {
            return Dataset::tfrecord(std::move(paths), compression_of(compression));
          },
          py::arg("paths"), py::arg("compression"))
      .def_static(
          "from_generator",
          [](py::function make_generator) {
            return Dataset::from_generator(python_generator(std::move(make_generator)));
          },
          py::arg("make_generator"))
      .def_static("zip", &Dataset::zip, py::arg("datasets"))
      .def(
          "map",
          [](const Dataset& ds, const ElementFunction& fn, int num_parallel_calls, bool deterministic) {
            return ds.map(fn.as_map_fn(), num_parallel_calls, deterministic);
          },
          py::arg("fn"), py::arg("num_parallel_calls"), py::arg("deterministic"))
      .def(
          "filter", [](const Dataset& ds, const ElementFunction& fn) { return ds.filter(fn.as_filter_fn()); },
          py::arg("predicate"))
      .def(
          "flat_map",
          [](const Dataset& ds, py::function fn) { return ds.flat_map(python_element_fn<Dataset>(std::move(fn))); },
          py::arg("fn"))
      .def(
          "interleave",
          [](const Dataset& ds, py::function fn, int cycle_length, int block_length, int num_parallel_calls) {
            return ds.interleave(python_element_fn<Dataset>(std::move(fn)), cycle_length, block_length,
                                 num_parallel_calls);
          },
          py::arg("fn"), py::arg("cycle_length"), py::arg("block_length"), py::arg("num_parallel_calls"))
      .def("shuffle", &Dataset::shuffle, py::arg("buffer_size"), py::arg("seed"), py::arg("reshuffle_each_iteration"))
      .def("batch", &Dataset::batch, py::arg("batch_size"), py::arg("drop_remainder"))
      .def(
          "padded_batch",
          [](const Dataset& ds, int64_t batch_size, const std::vector<std::vector<int64_t>>& shapes,
             std::vector<double> values, bool drop_remainder) {
            std::vector<Shape> padded;
            for (const auto& shape : shapes) padded.emplace_back(std::span<const int64_t>(shape));
            return ds.padded_batch(batch_size, std::move(padded), std::move(values), drop_remainder);
          },
          py::arg("batch_size"), py::arg("padded_shapes"), py::arg("padding_values"), py::arg("drop_remainder"))
      .def("unbatch", &Dataset::unbatch)
      .def("cache", &Dataset::cache, py::arg("filename"))
      .def("prefetch", &Dataset::prefetch, py::arg("buffer_size"))
      .def("repeat", &Dataset::repeat, py::arg("count"))
      .def("take", &Dataset::take, py::arg("count"))
      .def("skip", &Dataset::skip, py::arg("count"))
      .def("shard", &Dataset::shard, py::arg("num_shards"), py::arg("index"))
      .def("enumerate", &Dataset::enumerate, py::arg("start"))
      .def("ignore_errors", [](const Dataset& ds) { return ds.ignore_errors(); })
      .def("cardinality", &Dataset::cardinality)
      .def("describe", &Dataset::describe)
      .def("iterator", py::overload_cast<>(&Dataset::iterator, py::const_));
}

}  // namespace nimbus::python
