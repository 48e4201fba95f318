// Variables: named, mutable tensors that hold model state (weights, optimizer
// slots). Copies of a Variable refer to the same variable, as in TensorFlow.
//
//   Variable w(random_normal({784, 10}, 0, 0.05), "dense/kernel");
//   Tensor y = matmul(x, w.value());   // reading a trainable variable inside a tape watches it
//   w.assign(w.value() - grad * 0.1);   // in place: every holder of w.value() sees the update
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

class Variable {
 public:
  Variable() = default;
  explicit Variable(const Tensor& initial_value, std::string name = "", bool trainable = true);

  bool defined() const { return state_ != nullptr; }
  // The variable's tensor. Its identity never changes, so gradient tapes and
  // traced graphs can refer to it; assign() overwrites its elements.
  const Tensor& value() const;
  // A concrete value on another device is copied to the variable's first (a checkpoint's host tensors).
  void assign(const Tensor& new_value);
  void assign_add(const Tensor& delta);
  void assign_sub(const Tensor& delta);

  // Moves the variable to `device`: its value becomes a copy there, with a new identity, so call it
  // before any tape or traced function refers to the variable (the trainer does, before tracing).
  void place_on(Device device);

  const std::string& name() const;
  bool trainable() const;
  const Shape& shape() const { return value().shape(); }
  DType dtype() const { return value().dtype(); }
  bool same_as(const Variable& other) const { return state_ == other.state_; }

 private:
  struct State {
    Tensor value;
    std::string name;
    bool trainable = true;
    ~State();
  };
  const State& state() const;
  std::shared_ptr<State> state_;
};

// While alive, assigns on this thread take effect only where `condition` (a bool scalar tensor,
// possibly symbolic) is true: each becomes assign(v, where(condition, new_value, v)). Dynamic loss
// scaling wraps the optimizer's update in one, so a step with an inf or NaN gradient changes no
// weight, slot or step counter (Keras's LossScaleOptimizer skips the update the same way).
class ConditionalUpdateScope {
 public:
  explicit ConditionalUpdateScope(Tensor condition);
  ~ConditionalUpdateScope();
  ConditionalUpdateScope(const ConditionalUpdateScope&) = delete;
  ConditionalUpdateScope& operator=(const ConditionalUpdateScope&) = delete;
  // The innermost scope's condition on this thread, or an undefined tensor: updates that bypass
  // Variable::assign (adam_update) take it as an input.
  static const Tensor& current();

 private:
  Tensor previous_;
};

// What a live variable's tensor belongs to (graph dumps name captured
// variables, and graph cost counts trainable ones as parameters).
struct VariableInfo {
  std::string name;
  bool trainable = true;
};
// The variable whose tensor this is, or nullopt.
std::optional<VariableInfo> variable_info_of(const Tensor& tensor);

}  // namespace nimbus
