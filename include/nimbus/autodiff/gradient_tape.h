// GradientTape: reverse-mode automatic differentiation, TensorFlow's model.
// While a tape is alive it records every op whose inputs it watches (tensors
// passed to watch(), trainable variables read inside it, and everything
// computed from those); gradient() runs the ops' gradient rules backwards.
//
//   GradientTape tape;
//   Tensor loss = mean(sparse_softmax_cross_entropy(matmul(x, w.value()) + b.value(), labels));
//   std::vector<Tensor> grads = tape.gradient(loss, {w, b});
//
// The gradient rules are ops themselves, so the same code builds backward
// graphs in graph mode. A non-persistent tape (the default) gives one
// gradient() call and then frees what it recorded; persistent tapes allow
// several. Sources the tape does not watch (nor computed from watched
// tensors), and sources not connected to the target, get an undefined tensor
// (TensorFlow's None), or zeros with UnconnectedGradients::kZero.
#pragma once

#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "nimbus/autodiff/variable.h"
#include "nimbus/ops/attrs.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

enum class UnconnectedGradients { kNone, kZero };

class GradientTape final : public OpObserver {
 public:
  explicit GradientTape(bool persistent = false, bool watch_accessed_variables = true);
  ~GradientTape() override;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  void watch(const Tensor& tensor);
  void watch(const Variable& variable);

  // d target / d source for each source. `output_gradient` seeds the target's
  // gradient (ones when undefined, so a non-scalar target is implicitly summed).
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const Tensor& output_gradient = {},
                               UnconnectedGradients unconnected = UnconnectedGradients::kNone);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               const Tensor& output_gradient = {},
                               UnconnectedGradients unconnected = UnconnectedGradients::kNone);
  // The gradient of the sum of several targets (TensorFlow's list of targets): each target's gradient is
  // seeded with its output gradient (ones where that is undefined or `output_gradients` is empty).
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets, const std::vector<Tensor>& sources,
                               const std::vector<Tensor>& output_gradients = {},
                               UnconnectedGradients unconnected = UnconnectedGradients::kNone);

  // Called during the next gradient() with (source index, gradient) as soon as that source's gradient is
  // final, i.e. once the backward sweep has passed the source's earliest use; sources get it in the order the
  // sweep finishes them (last layer first). Data-parallel training starts each bucket's all-reduce from it.
  using GradientReady = std::function<void(size_t source, const Tensor& gradient)>;
  void on_gradient_ready(GradientReady callback) { on_gradient_ready_ = std::move(callback); }

  // Stops and resumes recording (TF's tape.stop_recording()).
  void pause();
  void resume();

  // How many op calls the tape holds (for tests and memory reports).
  size_t num_recorded() const { return entries_.size(); }
  // The variables the tape watches, in the order it began to (watch() or a read while recording).
  const std::vector<Variable>& watched_variables() const { return watched_variables_; }

  void on_op(const OpSchema& op, const Attrs& attrs, std::span<const Tensor> inputs,
             std::span<const Tensor> outputs) override;

  // Called by Variable::value() of a trainable variable with its tensor:
  // tapes on this thread that watch accessed variables watch it.
  static void notify_variable_read(const Variable& variable, const Tensor& value);

 private:
  void watch_variable(const Variable& variable, const Tensor& value);

  struct Entry {
    const OpSchema* op;
    Attrs attrs;
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
  };

  bool persistent_;
  bool watch_accessed_variables_;
  bool recording_ = true;
  bool used_ = false;
  std::unordered_set<uint64_t> tracked_;
  std::vector<Entry> entries_;
  std::vector<Variable> watched_variables_;
  GradientReady on_gradient_ready_;
};

}  // namespace nimbus
