// Dynamic loss scaling for f16 training (Keras's LossScaleOptimizer; PyTorch's GradScaler).
//
// f16 holds nothing below 2^-24, so small gradients of an f16 backward pass
// round to zero. The train step multiplies the loss by `scale` before the
// backward pass and the gradients by 1 / scale after it (in f32, on the
// master weights' gradients). When any gradient is inf or NaN the step
// applies no update (ConditionalUpdateScope) and the scale halves; after
// `growth_interval` finite steps in a row it doubles.
//
//   DynamicLossScale scale;            // 2^15, x2 after 2000 finite steps, /2 on overflow
//   Tensor scaled = loss * scale.variable().value();
//   ... gradients * (1 / scale), finite = all_finite(gradients) ...
//   scale.update(finite.item<bool>());  // after the step ran
//
// The trainer uses one under a mixed_float16 policy (not under mixed_bfloat16:
// bf16 has f32's range); its state goes into checkpoints.
#pragma once

#include <cstdint>
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
