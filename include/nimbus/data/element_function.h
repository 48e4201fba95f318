// ElementFunction: a per-element function (Dataset::map's, filter's) traced
// once into a program that pipeline threads replay with no caller code and no
// lock held: what makes a Python map run off the GIL.
//
//   ElementFunction fn = ElementFunction::trace(
//       [](const std::vector<Tensor>& in) {
//         Tensor image = record_host_step(decode_image_step, {in[0]})[0];  // u8 (?, ?, 3)
//         return std::vector<Tensor>{cast(image, DType::kF32) / 255.0, in[1]};
//       },
//       {{{-1}, DType::kU8}, {{}, DType::kI64}}, "preprocess");
//   Dataset ds = records.map(fn.as_map_fn(), kAutotune);
//
// Tracing runs the body once on symbolic tensors of the element's spec. Op
// calls (every nimbus op: cast, arithmetic, slice, ...) are recorded through
// dispatch's interceptor; data ops whose output shape depends on the values
// (decoding, parsing, random crops) are recorded as host steps by
// record_host_step. A replay runs each recorded call eagerly, so shapes may
// differ from element to element: unlike a graph (graph/function.h), the
// program has no static shapes.
//
// A dimension unknown at trace time (-1 in a spec) is traced twice over, with
// two different stand-in lengths: an output dimension that comes out equal in
// both is static, one that differs is unknown (-1). Python sees -1 as None.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::data {

// A component's dtype and shape; -1 marks a dimension unknown until run time.
struct ComponentSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
};

// A data op recorded into an ElementFunction (decode, parse, random crop, ...).
struct HostStep {
  std::string name;
  // The outputs for these inputs. `seed` is fresh for every call (random steps draw from it).
  std::function<std::vector<Tensor>(std::span<const Tensor> inputs, uint64_t seed)> run;
  // The outputs' specs for the inputs' specs (-1: unknown).
  std::function<std::vector<ComponentSpec>(std::span<const ComponentSpec> inputs)> infer;
};

class ElementFunction {
 public:
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

  // Runs `body` once on symbolic tensors of `inputs` and records what it calls. Errors in the body
  // propagate; reading a symbolic tensor's value is an InvalidArgument from the tensor.
  static ElementFunction trace(const Body& body, const std::vector<ComponentSpec>& inputs, std::string name);

  // Replays the program on one element; safe to call from several threads at once.
  Element operator()(const Element& element) const;
  MapFn as_map_fn() const;
  // A predicate: the program must return one bool scalar.
  FilterFn as_filter_fn() const;

  const std::vector<ComponentSpec>& output_specs() const;
  // One line per recorded call: "%3 = cast(%2) {dtype=f32}", "%1 = host decode_image(%0)".
  std::string to_text() const;

  struct Program;
  explicit ElementFunction(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

 private:
  std::shared_ptr<const Program> program_;
};

// Whether an ElementFunction is being traced on this thread.
bool tracing_element_function();
// Records `step` on `inputs` into the ElementFunction being traced on this thread and returns its
// symbolic outputs (an InvalidArgument when none is: call the step's function directly instead).
std::vector<Tensor> record_host_step(const HostStep& step, std::span<const Tensor> inputs);
// A tensor's shape as traced: -1 where the dimension is unknown; its plain shape otherwise.
std::vector<int64_t> traced_shape(const Tensor& tensor);

// random_flip_left_right of an (H, W, C) image as a host step. When the flipped image only feeds a
// cast to f32 and scalar arithmetic, the trace runs the flip inside that scale_shift_to_f32 pass.
HostStep random_flip_left_right_step();

}  // namespace nimbus::data
