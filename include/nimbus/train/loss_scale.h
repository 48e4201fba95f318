// Dynamic loss scaling for f16 training (Keras's LossScaleOptimizer; PyTorch's GradScaler).
//
// f16 holds nothing below 2^-24, so small gradients of an f16 backward pass
// round to zero. The train step multiplies the loss by `scale` before the
// backward pass and the gradients by 1 / scale after it (in f32, on the
// master weights' gradients). When any gradient is inf or NaN the step
// applies no update and the scale halves; after `growth_interval` finite
// steps in a row it doubles. Every part of it is here:
//
//   DynamicLossScale scale;                              // 2^15, x2 after 2000 finite steps, /2 on overflow
//   // in the traced step:
//   grads = tape.gradient(scale.scale_loss(loss), vars);
//   Tensor finite = scale.unscale(grads);
//   DynamicLossScale::apply_if_finite(finite, [&] { optimizer.apply_gradients(grads, vars); });
//   // on the host, after the step ran:
//   scale.update(finite.item<bool>());
//
// apply_if_finite opens an autodiff ConditionalUpdateScope, which stays in
// autodiff/variable.h because Variable::assign applies it (autodiff sits below
// train), and which fused updates that bypass assign (adam_update) take as an
// input (optimizers.cc); neither knows about loss scaling.
//
// The trainer uses one under a mixed_float16 policy (not under mixed_bfloat16:
// bf16 has f32's range); its state goes into checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nimbus/autodiff/variable.h"

namespace nimbus::train {

struct LossScaleOptions {
  double initial_scale = 32768;  // 2^15, as Keras (PyTorch starts at 2^16)
  int64_t growth_interval = 2000;
  double factor = 2;
};

class DynamicLossScale {
 public:
  explicit DynamicLossScale(LossScaleOptions options = {});

  // The scale as an f32 scalar variable, which a traced step reads by reference.
  const Variable& variable() const { return scale_; }
  // Moves the scale to the device the trainer runs on (before its step is traced).
  void place_on(Device device) { scale_.place_on(device); }
  double scale() const;
  // Finite steps since the scale last changed.
  int64_t good_steps() const { return good_steps_; }
  // Steps whose update was skipped for an inf or NaN gradient, over the run.
  int64_t skipped_steps() const { return skipped_steps_; }
  const LossScaleOptions& options() const { return options_; }

  // In the step: the loss the backward pass starts from, loss × scale (the variable, read by reference).
  Tensor scale_loss(const Tensor& loss) const;
  // In the step: each defined gradient × 1 / scale, in its dtype, in place; returns a bool scalar that is
  // true when every one is finite.
  Tensor unscale(std::vector<Tensor>& gradients) const;
  // In the step: runs `update` (the optimizer's) so that it changes no weight, slot or step counter
  // unless `finite` holds (ConditionalUpdateScope).
  static void apply_if_finite(const Tensor& finite, const std::function<void()>& update);

  // After a step whose gradients were finite (or not): grows, or halves and counts a skipped step.
  void update(bool gradients_finite);
  // Restores a checkpoint's state.
  void restore(double scale, int64_t good_steps, int64_t skipped_steps);

 private:
  LossScaleOptions options_;
  Variable scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

// A bool scalar: true when every element of every defined tensor is finite (one fused pass each).
Tensor all_finite(const std::vector<Tensor>& tensors);

}  // namespace nimbus::train
