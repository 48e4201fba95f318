#include "nimbus/data/element_function.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <random>
#include <unordered_map>

#include "nimbus/data/image_ops.h"
#include "nimbus/device/host_memory.h"
#include "nimbus/device/runtime.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/registry.h"
#include "pipeline.h"

namespace nimbus::data {
namespace {

// The stand-in lengths of an unknown dimension in the two shapes a trace carries (see the header):
// distinct, and unlike any length a data op fixes, so that a dimension equal in both is truly static.
constexpr int64_t kStandInA = 7919;
constexpr int64_t kStandInB = 7927;

class ElementRecorder;

// What a symbolic tensor of an element trace stands for: a slot of the program, and its shape as
// traced with the second stand-in (the tensor's own shape has the first).
struct ElementValue final : SymbolicValue {
  ElementValue(const ElementRecorder* r, int s, Shape b) : recorder(r), slot(s), shape_b(b) {}
  const ElementRecorder* recorder;
  int slot;
  Shape shape_b;
};

thread_local ElementRecorder* active_recorder = nullptr;

Shape with_stand_in(const std::vector<int64_t>& shape, int64_t stand_in) {
  std::vector<int64_t> dims = shape;
  for (int64_t& d : dims) d = d < 0 ? stand_in : d;
  return Shape(std::span<const int64_t>(dims));
}

std::vector<int64_t> merged_dims(const Shape& a, const Shape& b) {
  std::vector<int64_t> dims(static_cast<size_t>(a.rank()));
  for (int i = 0; i < a.rank(); ++i) dims[static_cast<size_t>(i)] = a[i] == b[i] ? a[i] : -1;
  return dims;
}

}  // namespace

struct ElementFunction::Program {
  // kFused: a chain of elementwise ops merged after tracing (fuse_elementwise_chains), run as one
  // fused_elementwise call at the shape its inputs broadcast to.
  enum class Kind { kArgument, kConstant, kOp, kHost, kFused };
  struct Node {
    Kind kind = Kind::kOp;
    int argument = -1;
    Tensor constant;
    const OpSchema* op = nullptr;
    Attrs attrs;
    Device device;
    HostStep step;
    std::shared_ptr<const ExpressionProgram> expression;  // kFused
    std::vector<int> inputs;                              // slots
    int first_output = 0;                                 // slot of output 0
    int output_count = 1;
    std::vector<int> last_uses;  // slots no later node reads: dropped once this node ran
  };
  std::string name;
  std::vector<Node> nodes;
  int slot_count = 0;
  std::vector<DType> slot_dtypes;
  size_t argument_count = 0;
  std::vector<int> outputs;  // slots
  std::vector<ComponentSpec> output_specs;
  uint64_t seed = 0;
  mutable std::atomic<uint64_t> calls{0};
};

namespace {

// Records op calls on its thread (dispatch's interceptor) and host steps into a Program.
class ElementRecorder final : public OpInterceptor {
 public:
  explicit ElementRecorder(ElementFunction::Program& program) : program_(program) {}

  Tensor argument(int index, const ComponentSpec& spec) {
    ElementFunction::Program::Node node{.kind = ElementFunction::Program::Kind::kArgument, .argument = index};
    return add_node(std::move(node), {{with_stand_in(spec.shape, kStandInA), with_stand_in(spec.shape, kStandInB)}},
                    {spec.dtype}, Device::cpu())[0];
  }

  // The slot a tensor stands for; a concrete tensor becomes a constant of the program.
  int slot_of(const Tensor& tensor) {
    if (tensor.is_symbolic()) {
      const auto* value = dynamic_cast<const ElementValue*>(tensor.symbolic_value().get());
      if (value == nullptr || value->recorder != this) {
        throw InvalidArgument(fmt::format("'{}': a symbolic tensor from another traced function was used in this "
                                          "dataset function",
                                          program_.name),
                              "pass values into the dataset function through its element");
      }
      return value->slot;
    }
    auto [it, inserted] = constants_.try_emplace(tensor.impl_ptr().get(), -1);
    if (inserted) {
      program_.nodes.push_back(
          {.kind = ElementFunction::Program::Kind::kConstant, .constant = tensor, .first_output = program_.slot_count});
      program_.slot_dtypes.push_back(tensor.dtype());
      it->second = program_.slot_count++;
    }
    return it->second;
  }

  std::vector<Tensor> intercept(const OpSchema& op, std::span<const Tensor> inputs, const Attrs& attrs,
                                Device device) override {
    // A tensor made from attributes alone (the fill of a scalar operand, x / 255.0) is a constant of
    // the program, made now: so it does not break a chain of elementwise ops that fusion merges.
    if (op.kind == OpKind::kSource && inputs.empty()) {
      struct Reinstall {
        OpInterceptor* self;
        ~Reinstall() { set_op_interceptor(self); }
      } reinstall{set_op_interceptor(nullptr)};
      return call_op(op, inputs, attrs, device);
    }
    std::vector<int> slots;
    std::vector<TensorSpec> specs_a, specs_b;
    for (const Tensor& input : inputs) {
      slots.push_back(slot_of(input));
      specs_a.push_back({input.shape(), input.dtype()});
      specs_b.push_back({shape_b(input), input.dtype()});
    }
    const std::vector<TensorSpec> outputs_a = infer_outputs(op, specs_a, attrs);
    const std::vector<TensorSpec> outputs_b = infer_outputs(op, specs_b, attrs);
    std::vector<std::pair<Shape, Shape>> shapes;
    std::vector<DType> dtypes;
    for (size_t k = 0; k < outputs_a.size(); ++k) {
      shapes.emplace_back(outputs_a[k].shape, outputs_b[k].shape);
      dtypes.push_back(outputs_a[k].dtype);
    }
    ElementFunction::Program::Node node{
        .kind = ElementFunction::Program::Kind::kOp, .op = &op, .attrs = attrs, .inputs = std::move(slots)};
    return add_node(std::move(node), shapes, dtypes, device);
  }

  std::vector<Tensor> host_step(const HostStep& step, std::span<const Tensor> inputs) {
    std::vector<int> slots;
    std::vector<ComponentSpec> specs;
    for (const Tensor& input : inputs) {
      slots.push_back(slot_of(input));
      specs.push_back({traced_shape(input), input.dtype()});
    }
    const std::vector<ComponentSpec> outputs = step.infer(specs);
    std::vector<std::pair<Shape, Shape>> shapes;
    std::vector<DType> dtypes;
    for (const ComponentSpec& output : outputs) {
      shapes.emplace_back(with_stand_in(output.shape, kStandInA), with_stand_in(output.shape, kStandInB));
      dtypes.push_back(output.dtype);
    }
    ElementFunction::Program::Node node{
        .kind = ElementFunction::Program::Kind::kHost, .step = step, .inputs = std::move(slots)};
    return add_node(std::move(node), shapes, dtypes, Device::cpu());
  }

  static Shape shape_b(const Tensor& tensor) {
    const auto* value = dynamic_cast<const ElementValue*>(tensor.symbolic_value().get());
    return value == nullptr ? tensor.shape() : value->shape_b;
  }

 private:
  std::vector<Tensor> add_node(ElementFunction::Program::Node node, const std::vector<std::pair<Shape, Shape>>& shapes,
                               const std::vector<DType>& dtypes, Device device) {
    node.device = device;
    node.first_output = program_.slot_count;
    node.output_count = static_cast<int>(shapes.size());
    program_.slot_count += node.output_count;
    program_.slot_dtypes.insert(program_.slot_dtypes.end(), dtypes.begin(), dtypes.end());
    std::vector<Tensor> results;
    for (size_t k = 0; k < shapes.size(); ++k) {
      auto value = std::make_shared<ElementValue>(this, node.first_output + static_cast<int>(k), shapes[k].second);
      results.push_back(Tensor::symbolic(shapes[k].first, dtypes[k], device, std::move(value)));
    }
    program_.nodes.push_back(std::move(node));
    return results;
  }

  ElementFunction::Program& program_;
  std::unordered_map<const TensorImpl*, int> constants_;
};

// Installs a recorder as this thread's interceptor and active recorder while alive.
class RecordingScope {
 public:
  explicit RecordingScope(ElementRecorder* recorder)
      : previous_interceptor_(set_op_interceptor(recorder)), previous_recorder_(active_recorder) {
    active_recorder = recorder;
  }
  ~RecordingScope() {
    set_op_interceptor(previous_interceptor_);
    active_recorder = previous_recorder_;
  }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  OpInterceptor* previous_interceptor_;
  ElementRecorder* previous_recorder_;
};

// As graph fusion's rule (graph/passes/fusion.cc): f32, 16-bit floats and bool.
bool fusible_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 || dtype == DType::kBool;
}

bool fusible(const ElementFunction::Program& program, const ElementFunction::Program::Node& node) {
  if (node.kind != ElementFunction::Program::Kind::kOp || node.output_count != 1) return false;
  const OpSchema& op = *node.op;
  if (op.kind != OpKind::kElementwise || op.has_side_effects || op.output_aliases_input) return false;
  if (!fusible_dtype(program.slot_dtypes[static_cast<size_t>(node.first_output)])) return false;
  return std::all_of(node.inputs.begin(), node.inputs.end(),
                     [&](int slot) { return fusible_dtype(program.slot_dtypes[static_cast<size_t>(slot)]); });
}

// Merges each chain of two or more elementwise ops, where every op but the last feeds only the next
// (x / 255.0 - 0.5 ...), into one kFused node in the place of the last: one pass over the element's
// memory instead of one per op. Constants recorded between the ops do not break a chain.
void fuse_elementwise_chains(ElementFunction::Program& program) {
  using Kind = ElementFunction::Program::Kind;
  std::vector<int> uses(static_cast<size_t>(program.slot_count), 0);
  for (const auto& node : program.nodes) {
    for (const int slot : node.inputs) ++uses[static_cast<size_t>(slot)];
  }
  for (const int slot : program.outputs) uses[static_cast<size_t>(slot)] += 2;  // never an intermediate
  std::vector<ElementFunction::Program::Node> fused_nodes;
  std::vector<size_t> chain;  // indices into program.nodes
  const auto flush = [&] {
    if (chain.size() < 2) {
      for (const size_t index : chain) fused_nodes.push_back(std::move(program.nodes[index]));
      chain.clear();
      return;
    }
    auto expression = std::make_shared<ExpressionProgram>();
    std::vector<int> inputs;
    std::unordered_map<int, ExpressionOperand> operand_of;  // slot -> operand
    for (const size_t index : chain) {
      const auto& node = program.nodes[index];
      ExpressionInstruction instruction{
          .op = node.op, .attrs = node.attrs, .dtype = program.slot_dtypes[static_cast<size_t>(node.first_output)]};
      for (const int slot : node.inputs) {
        auto [it, inserted] = operand_of.try_emplace(slot, ExpressionOperand{true, static_cast<int>(inputs.size())});
        if (inserted) inputs.push_back(slot);
        instruction.operands.push_back(it->second);
      }
      operand_of[node.first_output] = {false, static_cast<int>(expression->instructions.size())};
      expression->instructions.push_back(std::move(instruction));
    }
    expression->outputs = {static_cast<int>(expression->instructions.size()) - 1};
    const auto& last = program.nodes[chain.back()];
    fused_nodes.push_back({.kind = Kind::kFused,
                           .expression = std::move(expression),
                           .inputs = std::move(inputs),
                           .first_output = last.first_output});
    chain.clear();
  };
  for (size_t index = 0; index < program.nodes.size(); ++index) {
    auto& node = program.nodes[index];
    if (node.kind == Kind::kConstant || node.kind == Kind::kArgument) {
      fused_nodes.push_back(std::move(node));
      continue;
    }
    const bool continues = !chain.empty() && fusible(program, node) && [&] {
      const int previous = program.nodes[chain.back()].first_output;
      return uses[static_cast<size_t>(previous)] == 1 &&
             std::find(node.inputs.begin(), node.inputs.end(), previous) != node.inputs.end();
    }();
    if (!continues) flush();
    if (fusible(program, node)) {
      chain.push_back(index);
    } else {
      fused_nodes.push_back(std::move(node));
    }
  }
  flush();
  program.nodes = std::move(fused_nodes);
}

// value * scale + shift: what a chain of mul, add, sub and div by scalar constants computes.
struct ScalarAffine {
  float scale = 1.0f, shift = 0.0f;
};

// The affine map `fused` computes from its input slot `value_slot`, when it is such a chain (the
// value once in every instruction, the other operand a rank-0 constant); nullopt for anything else.
std::optional<ScalarAffine> affine_chain(const ElementFunction::Program::Node& fused, int value_slot,
                                         const std::unordered_map<int, Tensor>& constants) {
  const ExpressionProgram& expression = *fused.expression;
  const auto value_input = std::find(fused.inputs.begin(), fused.inputs.end(), value_slot) - fused.inputs.begin();
  ExpressionOperand value{true, static_cast<int>(value_input)};
  ScalarAffine affine;
  for (size_t t = 0; t < expression.instructions.size(); ++t) {
    const ExpressionInstruction& instruction = expression.instructions[t];
    if (instruction.dtype != DType::kF32 || instruction.operands.size() != 2) return std::nullopt;
    const bool value_first = instruction.operands[0] == value;
    if (!value_first && instruction.operands[1] != value) return std::nullopt;
    const ExpressionOperand& other = instruction.operands[value_first ? 1 : 0];
    if (!other.is_input) return std::nullopt;
    const auto constant = constants.find(fused.inputs[static_cast<size_t>(other.index)]);
    if (constant == constants.end() || constant->second.rank() != 0) return std::nullopt;
    const auto c = static_cast<float>(constant->second.to(DType::kF64).item<double>());
    const std::string& op = instruction.op->name;
    if (op == "mul") {
      affine = {affine.scale * c, affine.shift * c};
    } else if (op == "add") {
      affine.shift += c;
    } else if (op == "sub") {
      affine =
          value_first ? ScalarAffine{affine.scale, affine.shift - c} : ScalarAffine{-affine.scale, c - affine.shift};
    } else if (op == "div" && value_first) {
      affine = {affine.scale / c, affine.shift / c};
    } else {
      return std::nullopt;
    }
    value = {false, static_cast<int>(t)};
  }
  if (expression.outputs.size() != 1 || expression.outputs[0] != value.index || value.is_input) return std::nullopt;
  return affine;
}

constexpr const char* kRandomFlipStep = "random_flip_left_right";

// A cast from an integer dtype to f32 whose result only feeds a fused chain of scalar arithmetic
// (tf.cast(image, tf.float32) / 255.0 - 0.5, ...) becomes one scale_shift_to_f32 step: the pass over
// the pixels that the C++ pipeline's normalize makes, instead of a float copy of the element that a
// second pass then reads. Its result is within one rounding of the unfused ops' (fma, composed factors).
// A random flip whose image only feeds the cast joins the step too: its rows are read reversed (when
// the step's seed draws a flip), with no flipped copy of the image.
void run_integer_affine_as_scale_shift(ElementFunction::Program& program) {
  using Kind = ElementFunction::Program::Kind;
  static const OpSchema& cast = OpRegistry::global().get("cast");
  std::unordered_map<int, Tensor> constants;  // slot -> value
  std::unordered_map<int, size_t> producer;   // slot -> node index
  std::vector<int> uses(static_cast<size_t>(program.slot_count), 0);
  for (size_t index = 0; index < program.nodes.size(); ++index) {
    const auto& node = program.nodes[index];
    if (node.kind == Kind::kConstant) constants.emplace(node.first_output, node.constant);
    producer.emplace(node.first_output, index);
    for (const int slot : node.inputs) ++uses[static_cast<size_t>(slot)];
  }
  for (const int slot : program.outputs) uses[static_cast<size_t>(slot)] += 2;
  std::vector<bool> removed(program.nodes.size(), false);
  for (auto& node : program.nodes) {
    if (node.kind != Kind::kFused) continue;
    for (const int slot : node.inputs) {
      const auto& source = program.nodes[producer.at(slot)];
      if (source.kind != Kind::kOp || source.op != &cast || uses[static_cast<size_t>(slot)] != 1 ||
          !is_integral(program.slot_dtypes[static_cast<size_t>(source.inputs.at(0))]) ||
          program.slot_dtypes[static_cast<size_t>(slot)] != DType::kF32) {
        continue;
      }
      const std::optional<ScalarAffine> affine = affine_chain(node, slot, constants);
      if (!affine) continue;
      removed[producer.at(slot)] = true;
      const int image = source.inputs[0];
      const auto& flip = program.nodes[producer.at(image)];
      if (flip.kind == Kind::kHost && flip.step.name == kRandomFlipStep && uses[static_cast<size_t>(image)] == 1) {
        removed[producer.at(image)] = true;
        node = {.kind = Kind::kHost,
                .step = {.name = "random_flip_scale_shift_to_f32",
                         .run =
                             [a = *affine](std::span<const Tensor> in, uint64_t seed) {
                               return std::vector<Tensor>{
                                   scale_shift_to_f32(in[0], {a.scale}, {a.shift}, random_flip_drawn(seed))};
                             }},
                .inputs = {flip.inputs[0]},
                .first_output = node.first_output};
        break;
      }
      node = {.kind = Kind::kHost,
              .step = {.name = "scale_shift_to_f32",
                       .run =
                           [a = *affine](std::span<const Tensor> in, uint64_t) {
                             return std::vector<Tensor>{scale_shift_to_f32(in[0], {a.scale}, {a.shift})};
                           }},
              .inputs = {image},
              .first_output = node.first_output};
      break;
    }
  }
  std::vector<ElementFunction::Program::Node> kept;
  for (size_t index = 0; index < program.nodes.size(); ++index) {
    if (!removed[index]) kept.push_back(std::move(program.nodes[index]));
  }
  program.nodes = std::move(kept);
}

// So that a replay frees each intermediate as soon as nothing later reads it: the next op's output
// can then reuse that memory while it is still in cache.
void mark_last_uses(ElementFunction::Program& program) {
  std::vector<int> last_reader(static_cast<size_t>(program.slot_count), -1);
  for (size_t index = 0; index < program.nodes.size(); ++index) {
    for (const int slot : program.nodes[index].inputs) last_reader[static_cast<size_t>(slot)] = static_cast<int>(index);
  }
  for (const int slot : program.outputs) last_reader[static_cast<size_t>(slot)] = -1;
  for (auto& node : program.nodes) {
    if (node.kind == ElementFunction::Program::Kind::kConstant) {
      last_reader[static_cast<size_t>(node.first_output)] = -1;
    }
  }
  for (size_t slot = 0; slot < last_reader.size(); ++slot) {
    if (last_reader[slot] >= 0) {
      program.nodes[static_cast<size_t>(last_reader[slot])].last_uses.push_back(static_cast<int>(slot));
    }
  }
}

}  // namespace

ElementFunction ElementFunction::trace(const Body& body, const std::vector<ComponentSpec>& inputs, std::string name) {
  auto program = std::make_shared<Program>();
  program->name = std::move(name);
  program->seed = std::random_device{}();
  ElementRecorder recorder(*program);
  {
    const RecordingScope scope(&recorder);
    std::vector<Tensor> arguments;
    for (size_t i = 0; i < inputs.size(); ++i) arguments.push_back(recorder.argument(static_cast<int>(i), inputs[i]));
    program->argument_count = inputs.size();
    for (const Tensor& output : body(arguments)) {
      program->outputs.push_back(recorder.slot_of(output));
      program->output_specs.push_back({merged_dims(output.shape(), ElementRecorder::shape_b(output)), output.dtype()});
    }
  }
  fuse_elementwise_chains(*program);
  run_integer_affine_as_scale_shift(*program);
  mark_last_uses(*program);
  return ElementFunction(std::move(program));
}

Element ElementFunction::operator()(const Element& element) const {
  const Program& program = *program_;
  if (element.size() != program.argument_count) {
    throw InvalidArgument(fmt::format("'{}' was traced for another number of components than the element's {}",
                                      program.name, element.size()));
  }
  const uint64_t call = program.calls.fetch_add(1, std::memory_order_relaxed);
  const CallingThreadOnly single_threaded;  // parallelism comes from num_parallel_calls
  // The element's tensors are the pipeline's, counted as host pipeline memory, whose allocator keeps
  // freed buffers for the next element: fresh pages for each would cost more than the decode.
  const HostMemoryScope host_memory;
  std::vector<Tensor> slots(static_cast<size_t>(program.slot_count));
  std::vector<Tensor> inputs;
  for (size_t index = 0; index < program.nodes.size(); ++index) {
    const Program::Node& node = program.nodes[index];
    const auto first = slots.begin() + node.first_output;
    inputs.clear();
    for (const int slot : node.inputs) inputs.push_back(slots[static_cast<size_t>(slot)]);
    switch (node.kind) {
      case Program::Kind::kArgument: *first = element[static_cast<size_t>(node.argument)]; break;
      case Program::Kind::kConstant: *first = node.constant; break;
      case Program::Kind::kOp: {
        std::vector<Tensor> outputs = call_op(*node.op, inputs, node.attrs, node.device);
        std::move(outputs.begin(), outputs.end(), first);
        break;
      }
      case Program::Kind::kFused: {
        Shape shape = inputs[0].shape();
        for (const Tensor& input : inputs) shape = broadcast_shapes(shape, input.shape(), "fused elementwise");
        *first = fused_elementwise(inputs, node.expression, shape)[0];
        break;
      }
      case Program::Kind::kHost: {
        const uint64_t seed = detail::mix_seed(detail::mix_seed(program.seed, call), index);
        std::vector<Tensor> outputs = node.step.run(inputs, seed);
        std::move(outputs.begin(), outputs.end(), first);
        break;
      }
    }
    inputs.clear();
    for (const int slot : node.last_uses) slots[static_cast<size_t>(slot)] = Tensor();
  }
  Element result;
  for (const int slot : program.outputs) result.push_back(slots[static_cast<size_t>(slot)]);
  return result;
}

MapFn ElementFunction::as_map_fn() const {
  return [function = *this](const Element& element) { return function(element); };
}

FilterFn ElementFunction::as_filter_fn() const {
  const std::vector<ComponentSpec>& specs = output_specs();
  if (specs.size() != 1 || specs[0].dtype != DType::kBool || !specs[0].shape.empty()) {
    throw InvalidArgument(fmt::format("filter's predicate '{}' must return one bool scalar", program_->name),
                          "return a comparison such as x > 0, reduced to a scalar");
  }
  return [function = *this](const Element& element) { return function(element)[0].item<bool>(); };
}

const std::vector<ComponentSpec>& ElementFunction::output_specs() const { return program_->output_specs; }

std::string ElementFunction::to_text() const {
  std::string text;
  for (const Program::Node& node : program_->nodes) {
    std::vector<std::string> inputs;
    for (const int slot : node.inputs) inputs.push_back(fmt::format("%{}", slot));
    switch (node.kind) {
      case Program::Kind::kArgument:
        text += fmt::format("%{} = argument {}\n", node.first_output, node.argument);
        break;
      case Program::Kind::kConstant: text += fmt::format("%{} = constant\n", node.first_output); break;
      case Program::Kind::kOp:
        text += fmt::format("%{} = {}({})\n", node.first_output, node.op->name, fmt::join(inputs, ", "));
        break;
      case Program::Kind::kHost:
        text += fmt::format("%{} = host {}({})\n", node.first_output, node.step.name, fmt::join(inputs, ", "));
        break;
      case Program::Kind::kFused:
        text += fmt::format("%{} = fused_elementwise({}) {{{}}}\n", node.first_output, fmt::join(inputs, ", "),
                            node.expression->to_string());
        break;
    }
  }
  std::vector<std::string> outputs;
  for (const int slot : program_->outputs) outputs.push_back(fmt::format("%{}", slot));
  return text + fmt::format("return {}\n", fmt::join(outputs, ", "));
}

bool tracing_element_function() { return active_recorder != nullptr; }

std::vector<Tensor> record_host_step(const HostStep& step, std::span<const Tensor> inputs) {
  if (active_recorder == nullptr) {
    throw InvalidArgument(fmt::format("{}: a symbolic input outside a dataset function", step.name),
                          "data ops trace inside Dataset.map and filter, or run eagerly on tensors with values");
  }
  return active_recorder->host_step(step, inputs);
}

std::vector<int64_t> traced_shape(const Tensor& tensor) {
  if (tensor.is_symbolic()) {
    if (dynamic_cast<const ElementValue*>(tensor.symbolic_value().get()) != nullptr) {
      return merged_dims(tensor.shape(), ElementRecorder::shape_b(tensor));
    }
  }
  const auto dims = tensor.shape().dims();
  return {dims.begin(), dims.end()};
}

HostStep random_flip_left_right_step() {
  return {kRandomFlipStep,
          [](std::span<const Tensor> in, uint64_t seed) {
            return std::vector<Tensor>{random_flip_left_right(in[0], seed)};
          },
          [](std::span<const ComponentSpec> inputs) {
            if (inputs[0].shape.size() != 3) {
              throw InvalidArgument(fmt::format("random_flip_left_right: an image has shape (H, W, C), got rank {}",
                                                inputs[0].shape.size()),
                                    "map over single images (before batch), or unbatch first");
            }
            return std::vector<ComponentSpec>{inputs[0]};
          }};
}

}  // namespace nimbus::data
