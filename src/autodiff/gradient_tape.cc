#include "nimbus/autodiff/gradient_tape.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/op_schema.h"

namespace nimbus {

namespace {
std::vector<GradientTape*>& active_tapes() {
  thread_local std::vector<GradientTape*> tapes;
  return tapes;
}
}  // namespace

GradientTape::GradientTape(bool persistent, bool watch_accessed_variables)
    : persistent_(persistent), watch_accessed_variables_(watch_accessed_variables) {
  add_op_observer(this);
  active_tapes().push_back(this);
}

GradientTape::~GradientTape() {
  remove_op_observer(this);
  auto& tapes = active_tapes();
  tapes.erase(std::remove(tapes.begin(), tapes.end(), this), tapes.end());
}

void GradientTape::watch(const Tensor& tensor) { tracked_.insert(tensor.id()); }

void GradientTape::watch(const Variable& variable) { watch_variable(variable, variable.value()); }

void GradientTape::watch_variable(const Variable& variable, const Tensor& value) {
  if (tracked_.insert(value.id()).second) watched_variables_.push_back(variable);
}

void GradientTape::notify_variable_read(const Variable& variable, const Tensor& value) {
  for (GradientTape* tape : active_tapes()) {
    if (tape->watch_accessed_variables_ && tape->recording_) tape->watch_variable(variable, value);
  }
}

void GradientTape::pause() { recording_ = false; }
void GradientTape::resume() { recording_ = true; }

void GradientTape::on_op(const OpSchema& op, const Attrs& attrs, std::span<const Tensor> inputs,
                         std::span<const Tensor> outputs) {
  if (!recording_) return;
  const bool watched =
      std::any_of(inputs.begin(), inputs.end(), [&](const Tensor& t) { return tracked_.count(t.id()) != 0; });
  if (!watched) return;
  for (const Tensor& output : outputs) tracked_.insert(output.id());
  entries_.push_back(Entry{&op, attrs, {inputs.begin(), inputs.end()}, {outputs.begin(), outputs.end()}});
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           const Tensor& output_gradient, UnconnectedGradients unconnected) {
  return gradient(std::vector<Tensor>{target}, sources, std::vector<Tensor>{output_gradient}, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets, const std::vector<Tensor>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  if (used_ && !persistent_) {
    throw InvalidArgument("gradient() called twice on a non-persistent GradientTape",
                          "construct the tape with GradientTape(/*persistent=*/true) to take several gradients");
  }
  if (targets.empty()) throw InvalidArgument("gradient(): no target");
  if (!output_gradients.empty() && output_gradients.size() != targets.size()) {
    throw InvalidArgument(
        fmt::format("gradient(): {} output gradients for {} targets", output_gradients.size(), targets.size()),
        "give one output gradient per target, or none");
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    const Tensor& target = targets[t];
    if (!target.defined()) throw InvalidArgument(fmt::format("gradient(): target {} is an undefined tensor", t));
    const Tensor& output_gradient = output_gradients.empty() ? Tensor() : output_gradients[t];
    if (output_gradient.defined() &&
        (output_gradient.shape() != target.shape() || output_gradient.dtype() != target.dtype())) {
      throw InvalidArgument(fmt::format("gradient(): output_gradient {} is {} {}, its target is {} {}", t,
                                        dtype_name(output_gradient.dtype()), output_gradient.shape().to_string(),
                                        dtype_name(target.dtype()), target.shape().to_string()));
    }
  }
  // Only a call that passed the checks uses up a non-persistent tape.
  used_ = true;
  const GradientReady ready = std::move(on_gradient_ready_);  // for this call only
  on_gradient_ready_ = nullptr;
  // Gradient rules run ops; this tape must not record them (no higher-order gradients).
  struct PauseRecording {
    bool& recording;
    bool previous;
    explicit PauseRecording(bool& r) : recording(r), previous(r) { recording = false; }
    ~PauseRecording() { recording = previous; }
  } pause_recording(recording_);

  // Forward sweep: which tensors depend on a source (only their gradients are needed).
  // Only sources the tape tracks count: an unwatched tensor (or a frozen
  // variable) that meets a watched one in an op gets no gradient.
  std::unordered_set<uint64_t> reaches_source;
  for (const Tensor& source : sources) {
    if (tracked_.count(source.id()) != 0) reaches_source.insert(source.id());
  }
  for (const Entry& entry : entries_) {
    const bool depends = std::any_of(entry.inputs.begin(), entry.inputs.end(),
                                     [&](const Tensor& t) { return reaches_source.count(t.id()) != 0; });
    if (depends) {
      for (const Tensor& output : entry.outputs) reaches_source.insert(output.id());
    }
  }

  // With a ready callback: the sources whose earliest use is each entry (their gradient is final once the
  // backward sweep has run that entry's rule).
  std::unordered_map<size_t, std::vector<size_t>> final_after;
  if (ready) {
    std::unordered_map<uint64_t, size_t> first_use;
    for (size_t e = 0; e < entries_.size(); ++e) {
      for (const Tensor& input : entries_[e].inputs) first_use.try_emplace(input.id(), e);
    }
    for (size_t s = 0; s < sources.size(); ++s) {
      const auto found = first_use.find(sources[s].id());
      if (found != first_use.end() && reaches_source.count(sources[s].id()) != 0) {
        final_after[found->second].push_back(s);
      }
    }
  }

  std::unordered_map<uint64_t, Tensor> grads;
  for (size_t t = 0; t < targets.size(); ++t) {
    const bool seeded = !output_gradients.empty() && output_gradients[t].defined();
    const Tensor seed = seeded ? output_gradients[t] : ones_like(targets[t]);
    auto [slot, inserted] = grads.try_emplace(targets[t].id(), seed);
    if (!inserted) slot->second = add(slot->second, seed);
  }

  // One entry's gradient rule: its outputs' gradients into its inputs'.
  auto run_rule = [&](const Entry& entry) {
    std::vector<Tensor> grad_outputs(entry.outputs.size());
    bool any_grad = false;
    for (size_t i = 0; i < entry.outputs.size(); ++i) {
      auto found = grads.find(entry.outputs[i].id());
      if (found != grads.end()) {
        grad_outputs[i] = found->second;
        any_grad = true;
      }
    }
    if (!any_grad || !entry.op->differentiable) return;
    std::unique_ptr<bool[]> needs(new bool[entry.inputs.size()]);
    bool any_needed = false;
    for (size_t i = 0; i < entry.inputs.size(); ++i) {
      needs[i] = reaches_source.count(entry.inputs[i].id()) != 0 && is_floating(entry.inputs[i].dtype());
      any_needed = any_needed || needs[i];
    }
    if (!any_needed) return;
    const GradContext context{*entry.op,     entry.attrs,  entry.inputs,
                              entry.outputs, grad_outputs, std::span<const bool>(needs.get(), entry.inputs.size())};
    const std::vector<Tensor> input_grads = entry.op->gradient(context);
    NIMBUS_ASSERT(input_grads.size() == entry.inputs.size())
        << "gradient rule of '" << entry.op->name << "' returned " << input_grads.size() << " gradients for "
        << entry.inputs.size() << " inputs";
    for (size_t i = 0; i < entry.inputs.size(); ++i) {
      const Tensor& g = input_grads[i];
      if (!needs[i] || !g.defined()) continue;
      const Tensor& input = entry.inputs[i];
      NIMBUS_ASSERT(g.shape() == input.shape() && g.dtype() == input.dtype())
          << "gradient rule of '" << entry.op->name << "' gave input " << i << " a " << dtype_name(g.dtype()) << " "
          << g.shape().to_string() << " gradient for a " << dtype_name(input.dtype()) << " "
          << input.shape().to_string() << " input";
      auto [slot, inserted] = grads.try_emplace(input.id(), g);
      if (!inserted) slot->second = add(slot->second, g);
    }
  };
  for (size_t e = entries_.size(); e-- > 0;) {
    run_rule(entries_[e]);
    const auto done = final_after.find(e);
    if (done == final_after.end()) continue;
    for (size_t s : done->second) {
      const auto found = grads.find(sources[s].id());
      if (found != grads.end()) ready(s, found->second);
    }
  }

  std::vector<Tensor> result;
  result.reserve(sources.size());
  for (const Tensor& source : sources) {
    auto found = reaches_source.count(source.id()) != 0 ? grads.find(source.id()) : grads.end();
    if (found != grads.end()) {
      result.push_back(found->second);
    } else {
      result.push_back(unconnected == UnconnectedGradients::kZero ? zeros_like(source) : Tensor());
    }
  }
  if (!persistent_) {
    entries_.clear();
    entries_.shrink_to_fit();
  }
  return result;
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Variable>& sources,
                                           const Tensor& output_gradient, UnconnectedGradients unconnected) {
  std::vector<Tensor> tensors;
  tensors.reserve(sources.size());
  for (const Variable& v : sources) tensors.push_back(v.value());
  return gradient(target, tensors, output_gradient, unconnected);
}

}  // namespace nimbus
