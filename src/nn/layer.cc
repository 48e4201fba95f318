#include "nimbus/nn/layer.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_set>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/precision.h"

namespace nimbus::nn {

namespace {
std::mutex names_mutex;
std::map<std::string, int>& name_counters() {
  static std::map<std::string, int> counters;
  return counters;
}
std::atomic<uint64_t> next_node_id{1};

// The most a weight can take on this host: its physical memory, or the process's address-space
// limit (RLIMIT_AS) when lower.
double host_memory_bytes() {
  double bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    bytes = std::min(bytes, static_cast<double>(limit.rlim_cur));
  }
  return bytes;
}

Dims dims_of(const Tensor& tensor) {
  Dims dims = tensor.shape().to_vector();
  if (!dims.empty()) dims[0] = -1;
  return dims;
}

// Distinct layers that produced `inputs`, counted through their whole history:
// the index a new layer applied to them gets in its model.
int count_ancestor_layers(const std::vector<KerasTensor>& inputs) {
  std::unordered_set<const LayerImpl*> seen;
  std::vector<const KerasTensor::Node*> stack;
  stack.reserve(inputs.size());
  std::unordered_set<const KerasTensor::Node*> visited;
  for (const KerasTensor& input : inputs) stack.push_back(input.node().get());
  while (!stack.empty()) {
    const KerasTensor::Node* node = stack.back();
    stack.pop_back();
    if (!visited.insert(node).second) continue;
    seen.insert(node->layer.get());
    for (const KerasTensor& input : node->inputs) stack.push_back(input.node().get());
  }
  return static_cast<int>(seen.size());
}
}  // namespace

namespace {
std::atomic<DType> default_float_dtype{DType::kF32};
}

DType floatx() { return default_float_dtype.load(); }

void set_floatx(DType dtype) {
  if (!is_floating(dtype)) {
    throw InvalidArgument(fmt::format("set_floatx: {} is not a floating dtype", dtype_name(dtype)));
  }
  default_float_dtype.store(dtype);
}

std::string format_dims(const Dims& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ", ";
    text += dims[i] < 0 ? std::string("None") : std::to_string(dims[i]);
  }
  if (dims.size() == 1) text += ",";
  return text + ")";
}

std::string unique_layer_name(const std::string& prefix) {
  std::lock_guard lock(names_mutex);
  const int count = name_counters()[prefix]++;
  return count == 0 ? prefix : fmt::format("{}_{}", prefix, count);
}

void reset_layer_names() {
  std::lock_guard lock(names_mutex);
  name_counters().clear();
}

LayerImpl::LayerImpl(std::string class_name, std::string name)
    : dtype_policy(global_policy()), class_name_(std::move(class_name)), name_(std::move(name)) {}

std::vector<Tensor> LayerImpl::call_with_policy(const std::vector<Tensor>& inputs, bool training) {
  const DType compute = dtype_policy.compute_dtype;
  auto needs_cast = [&](const Tensor& input) {
    const DType dtype = input.dtype();
    return (dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16) && dtype != compute;
  };
  const bool any_cast = std::any_of(inputs.begin(), inputs.end(), needs_cast);
  // A float32 layer with f32 inputs outside any mixed layer has nothing to do.
  if (compute == DType::kF32 && autocast_dtype() == DType::kF32 && !any_cast) return call(inputs, training);
  AutocastScope autocast(compute);
  if (!any_cast) return call(inputs, training);
  std::vector<Tensor> cast_inputs = inputs;
  for (Tensor& input : cast_inputs) {
    if (needs_cast(input)) input = cast(input, compute);
  }
  return call(cast_inputs, training);
}

LayerImpl::~LayerImpl() = default;

void LayerImpl::ensure_built(const std::vector<Dims>& input_shapes) {
  if (built_) return;
  (void)compute_output_shapes(input_shapes);
  build(input_shapes);
  built_ = true;
}

Variable LayerImpl::add_weight(const std::string& weight_name, const Shape& shape, const Initializer& initializer,
                               bool weight_trainable, const Regularizer& regularizer) {
  // A weight larger than the host's memory is refused before it is allocated (a Dense(100000000)
  // would otherwise end in std::bad_alloc, or page for minutes), naming the layer and the bytes.
  double bytes = static_cast<double>(dtype_size(floatx()));
  for (int64_t d : shape.to_vector()) bytes *= static_cast<double>(d);
  auto too_large = [&](const std::string& available) {
    // (The callers, apply_symbolic and Layer::operator(), put the layer's name in front.)
    return OutOfMemory(
        fmt::format("its weight '{}' of shape {} in {} needs {}, more than {}", weight_name, shape.to_string(),
                    dtype_name(floatx()), format_bytes(static_cast<uint64_t>(std::min(bytes, 1e19))), available),
        "make the layer smaller (fewer units or filters), or its input (a pooling or a "
        "smaller Flatten before it)");
  };
  if (bytes > host_memory_bytes()) {
    throw too_large(fmt::format("this host's memory, {}", format_bytes(static_cast<uint64_t>(host_memory_bytes()))));
  }
  Variable variable;
  try {
    variable = Variable(initializer.make(shape, floatx()), name_ + "/" + weight_name, weight_trainable);
  } catch (const std::bad_alloc&) {
    throw too_large("the memory left to this process");
  }
  weights_.push_back({variable, weight_trainable, regularizer});
  return variable;
}

std::vector<Variable> LayerImpl::weights() const {
  std::vector<Variable> result;
  for (const Weight& weight : weights_) result.push_back(weight.variable);
  return result;
}

std::vector<Variable> LayerImpl::trainable_weights() const {
  std::vector<Variable> result;
  if (!trainable) return result;
  for (const Weight& weight : weights_) {
    if (weight.trainable) result.push_back(weight.variable);
  }
  return result;
}

std::vector<Variable> LayerImpl::non_trainable_weights() const {
  std::vector<Variable> result;
  for (const Weight& weight : weights_) {
    if (!trainable || !weight.trainable) result.push_back(weight.variable);
  }
  return result;
}

int64_t LayerImpl::count_params() const {
  int64_t total = 0;
  for (const Weight& weight : weights_) total += weight.variable.shape().numel();
  return total;
}

Tensor LayerImpl::regularization_loss() const {
  Tensor total;
  for (const Weight& weight : weights_) {
    if (!weight.regularizer.active()) continue;
    Tensor penalty = weight.regularizer.penalty(weight.variable.value());
    total = total.defined() ? total + penalty : penalty;
  }
  return total;
}

KerasTensor apply_symbolic(const std::shared_ptr<LayerImpl>& layer, const std::vector<KerasTensor>& inputs, int index) {
  const int expected = layer->num_inputs();
  auto where = [&] { return fmt::format("layer {} '{}' ({})", index, layer->name(), layer->class_name()); };
  if (expected >= 0 && static_cast<int>(inputs.size()) != expected) {
    throw InvalidArgument(fmt::format("{}: takes {} input(s), got {}", where(), expected, inputs.size()));
  }
  if (expected < 0 && inputs.size() < 2) {
    throw InvalidArgument(fmt::format("{}: takes two or more inputs, got {}", where(), inputs.size()));
  }
  std::vector<Dims> input_shapes;
  for (const KerasTensor& input : inputs) {
    NIMBUS_ASSERT(input.defined()) << "undefined KerasTensor passed to " << layer->name();
    input_shapes.push_back(input.shape());
  }
  auto node = std::make_shared<KerasTensor::Node>();
  node->layer = layer;
  node->inputs = inputs;
  node->id = next_node_id++;
  try {
    node->output_shapes = layer->compute_output_shapes(input_shapes);
    layer->ensure_built(input_shapes);
  } catch (const OutOfMemory& error) {
    // Its weights did not fit on the device: the input is not at fault.
    throw OutOfMemory(fmt::format("{}: making its weights: {}", where(), error.message()), error.hint());
  } catch (const Error& error) {
    std::string inputs_text;
    for (const Dims& dims : input_shapes) inputs_text += (inputs_text.empty() ? "" : ", ") + format_dims(dims);
    throw InvalidArgument(fmt::format("{} on input {}: {}", where(), inputs_text, error.message()), error.hint());
  }
  // Layers keep their input's floating dtype; Rescaling, Normalization and Embedding produce floatx().
  node->dtype = inputs.empty() ? floatx() : inputs[0].dtype();
  const std::string& kind = layer->class_name();
  if (kind == "Rescaling" || kind == "Normalization" || kind == "Embedding") node->dtype = floatx();
  return KerasTensor(node, 0);
}

KerasTensor Input(const Dims& shape, DType dtype, const std::string& name) {
  Layer layer = InputLayer(shape, dtype, name);
  auto node = std::make_shared<KerasTensor::Node>();
  node->layer = layer.impl();
  Dims full = {-1};
  full.insert(full.end(), shape.begin(), shape.end());
  node->output_shapes = {full};
  node->dtype = dtype;
  node->id = next_node_id++;
  return KerasTensor(node, 0);
}

Tensor Layer::operator()(const Tensor& input, bool training) const {
  std::vector<Tensor> outputs = (*this)(std::vector<Tensor>{input}, training);
  NIMBUS_ASSERT(outputs.size() == 1) << impl_->name() << " returned " << outputs.size() << " outputs";
  return outputs[0];
}

std::vector<Tensor> Layer::operator()(const std::vector<Tensor>& inputs, bool training) const {
  NIMBUS_ASSERT(impl_ != nullptr) << "calling an undefined layer";
  if (!impl_->built()) {
    std::vector<Dims> shapes;
    shapes.reserve(inputs.size());
    for (const Tensor& input : inputs) shapes.push_back(dims_of(input));
    try {
      impl_->ensure_built(shapes);
    } catch (const Error& error) {
      throw InvalidArgument(fmt::format("layer '{}' ({}): {}", impl_->name(), impl_->class_name(), error.message()),
                            error.hint());
    }
  }
  return impl_->call_with_policy(inputs, training);
}

KerasTensor Layer::operator()(const KerasTensor& input) const { return (*this)(std::vector<KerasTensor>{input}); }

KerasTensor Layer::operator()(const std::vector<KerasTensor>& inputs) const {
  return apply_symbolic(impl_, inputs, count_ancestor_layers(inputs));
}

}  // namespace nimbus::nn
