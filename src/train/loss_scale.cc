#include "nimbus/train/loss_scale.h"

#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/error.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"

namespace nimbus::train {

DynamicLossScale::DynamicLossScale(LossScaleOptions options)
    : options_(options), scale_(Tensor::scalar<float>(static_cast<float>(options.initial_scale)), "loss_scale", false) {
  if (!(options.initial_scale > 0) || options.growth_interval < 1 || !(options.factor > 1)) {
    throw InvalidArgument(
        fmt::format("loss scale: initial_scale {} must be > 0, growth_interval {} >= 1, factor {} > 1",
                    options.initial_scale, options.growth_interval, options.factor));
  }
}

double DynamicLossScale::scale() const { return scale_.value().item<double>(); }

Tensor DynamicLossScale::scale_loss(const Tensor& loss) const { return loss * scale_.value(); }

Tensor DynamicLossScale::unscale(std::vector<Tensor>& gradients) const {
  const Tensor inverse = 1.0 / scale_.value();
  for (Tensor& g : gradients) g = g.defined() ? g * cast(inverse, g.dtype()) : g;
  return all_finite(gradients);
}

void DynamicLossScale::apply_if_finite(const Tensor& finite, const std::function<void()>& update) {
  const ConditionalUpdateScope skip_on_overflow(finite);
  update();
}

void DynamicLossScale::update(bool gradients_finite) {
  double next = scale();
  if (gradients_finite) {
    if (++good_steps_ < options_.growth_interval) return;
    next *= options_.factor;
  } else {
    ++skipped_steps_;
    // Keras stops halving at 1: a scale below one would shrink gradients further.
    next = std::max(1.0, next / options_.factor);
  }
  good_steps_ = 0;
  scale_.assign(Tensor::scalar<float>(static_cast<float>(next)));
}

void DynamicLossScale::restore(double scale, int64_t good_steps, int64_t skipped_steps) {
  scale_.assign(Tensor::scalar<float>(static_cast<float>(scale)));
  good_steps_ = good_steps;
  skipped_steps_ = skipped_steps;
}

Tensor all_finite(const std::vector<Tensor>& tensors) {
  // x * 0 is 0 for finite x and NaN for inf or NaN, so one sum per tensor says whether all are finite.
  Tensor total;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    const Tensor zeros = sum(cast(t, DType::kF32) * 0.0, {}, false);
    total = total.defined() ? total + zeros : zeros;
  }
  if (!total.defined()) return Tensor::scalar<bool>(true);
  return isfinite(total);
}

}  // namespace nimbus::train
