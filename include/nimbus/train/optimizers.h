// Optimizers and learning-rate schedules, with Keras's names, defaults and
// update rules. Updates are ops on Variables, so they run eagerly or trace
// into the train step's graph alike.
//
//   auto optimizer = train::Adam({.learning_rate = 1e-3, .global_clipnorm = 1.0});
//   optimizer->build(model.trainable_weights());   // creates the slots (outside any traced function)
//   optimizer->apply_gradients(grads, model.trainable_weights());
//
//   auto schedule = train::CosineDecay({.initial_learning_rate = 0, .decay_steps = 1000,
//                                       .warmup_target = 1e-3, .warmup_steps = 100});
//   auto sgd = train::SGD({.learning_rate = schedule, .momentum = 0.9, .nesterov = true});
//
// Update rules (g the gradient after clipping, t the step counted from 1, lr the rate at step t - 1):
//   SGD:      v = momentum v - lr g;  w += v  (nesterov: w += momentum v - lr g); plain: w -= lr g
//   Adam:     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//             w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + epsilon)
//   AdamW:    Adam, after w -= lr weight_decay w (decoupled decay; not for excluded variables)
//   RMSprop:  v = rho v + (1 - rho) g^2;  w -= lr g / sqrt(v + epsilon)  (momentum, centered: as in Keras)
// Clipping: clipnorm scales each gradient to at most that L2 norm; global_clipnorm
// scales all of them by min(1, global_clipnorm / ||all gradients||).
// Fused Adam (AdamOptions::fused, PyTorch's fused=True): the variables of each dtype and device are
// updated by one adam_update op (ops/optimizer_updates.h; one kernel launch on CUDA) instead of a
// chain of ops per variable; the results are the same bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nimbus/autodiff/variable.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::train {

// A learning rate as a function of the step (a rank-0 f32 tensor, counted from 0).
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual Tensor operator()(const Tensor& step) const = 0;
  // The rate at `step`, computed on the host (for logs and tests).
  double at(int64_t step) const;
};

struct ExponentialDecayOptions {
  double initial_learning_rate = 1e-3;
  int64_t decay_steps = 1000;
  double decay_rate = 0.96;
  bool staircase = false;
};
// initial * decay_rate ^ (step / decay_steps), the exponent floored when staircase.
std::shared_ptr<LearningRateSchedule> ExponentialDecay(const ExponentialDecayOptions& options);

struct CosineDecayOptions {
  double initial_learning_rate = 1e-3;
  int64_t decay_steps = 1000;
  double alpha = 0;  // the floor, as a fraction of the peak rate
  std::optional<double> warmup_target{};
  int64_t warmup_steps = 0;
};
// Keras's CosineDecay: with warmup_target, rises linearly from the initial rate to the target over
// warmup_steps, then decays from the target; the decay is
// peak * ((1 - alpha) * 0.5 * (1 + cos(pi * min(s, decay_steps) / decay_steps)) + alpha), s counted after warmup.
std::shared_ptr<LearningRateSchedule> CosineDecay(const CosineDecayOptions& options);

struct PiecewiseConstantDecayOptions {
  std::vector<int64_t> boundaries{};  // increasing steps
  std::vector<double> values{};       // one more than boundaries
};
// Keras's PiecewiseConstantDecay: values[0] up to step boundaries[0] (inclusive), values[i] up to
// boundaries[i], and values.back() after the last boundary.
std::shared_ptr<LearningRateSchedule> PiecewiseConstantDecay(const PiecewiseConstantDecayOptions& options);

// A constant rate or a schedule.
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT: `.learning_rate = 1e-3` reads like Keras
  LearningRate(std::shared_ptr<LearningRateSchedule> schedule) : value_(0), schedule_(std::move(schedule)) {}  // NOLINT
  Tensor operator()(const Tensor& step) const;
  double at(int64_t step) const;
  bool is_schedule() const { return schedule_ != nullptr; }

 private:
  double value_;
  std::shared_ptr<LearningRateSchedule> schedule_;
};

struct ClipOptions {
  std::optional<double> clipnorm{};
  std::optional<double> global_clipnorm{};
};

class Optimizer {
 public:
  Optimizer(std::string name, LearningRate learning_rate, ClipOptions clip);
  virtual ~Optimizer();

  const std::string& name() const { return name_; }
  // Creates the slot variables for these variables (and the step counter). Call
  // before tracing: variables cannot be created inside a traced function.
  void build(const std::vector<Variable>& variables);
  bool built() const { return built_; }
  // One update: clips, applies the rule to each (gradient, variable) pair, counts the step.
  // Undefined gradients (variables the loss does not reach) are skipped.
  void apply_gradients(const std::vector<Tensor>& gradients, const std::vector<Variable>& variables);
  // Steps taken (Keras's optimizer.iterations), an i64 variable.
  const Variable& iterations() const { return iterations_; }
  // The rate the next update uses.
  double current_learning_rate() const;
  // Replaces a constant rate (ReduceLROnPlateau, LearningRateScheduler); traced steps see the new
  // value. InvalidArgument when the rate is a schedule.
  void set_learning_rate(double value);
  // The step counter, the learning rate (when constant) and the slot variables ("m", "v",
  // "momentum", ...) in creation order, for checkpoints.
  std::vector<Variable> variables() const;

  // A new, unbuilt optimizer with the same settings (each replica of a Mirrored strategy has one).
  virtual std::shared_ptr<Optimizer> clone() const = 0;

  // Clipping as configured; exposed for tests.
  std::vector<Tensor> clip_gradients(const std::vector<Tensor>& gradients) const;

 protected:
  virtual void build_slots(size_t index, const Variable& variable) = 0;
  // lr: rank-0 tensor of the variable's dtype; step: t (from 1) as a rank-0 f32 tensor.
  virtual void update(size_t index, Variable variable, const Tensor& gradient, const Tensor& lr,
                      const Tensor& step) = 0;
  // Updates the variables at `indices` (those with a gradient): update() for each, unless an optimizer
  // updates many at once.
  virtual void update_all(const std::vector<size_t>& indices, const std::vector<Variable>& variables,
                          const std::vector<Tensor>& gradients, const Tensor& lr, const Tensor& step);
  Variable add_slot(const Variable& variable, const std::string& slot_name);

 private:
  std::string name_;
  LearningRate learning_rate_;
  ClipOptions clip_;
  bool built_ = false;
  Variable iterations_;
  Variable learning_rate_value_;  // f64 scalar, for constant rates
  std::vector<Variable> slots_;
  std::vector<uint64_t> variable_ids_;
};

struct SGDOptions {
  LearningRate learning_rate = 0.01;
  double momentum = 0;
  bool nesterov = false;
  std::optional<double> clipnorm{};
  std::optional<double> global_clipnorm{};
};
std::shared_ptr<Optimizer> SGD(const SGDOptions& options = {});

struct AdamOptions {
  LearningRate learning_rate = 1e-3;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  std::optional<double> clipnorm{};
  std::optional<double> global_clipnorm{};
  // Fused update (adam_update): unset, where the op has a kernel faster than its reference loop for
  // the variables' device and dtype (f32 and f64 on the CPU, f32 on CUDA); true, wherever it has a
  // kernel (InvalidArgument for f16 / bf16 variables); false, never.
  std::optional<bool> fused{};
};
std::shared_ptr<Optimizer> Adam(const AdamOptions& options = {});

struct AdamWOptions {
  LearningRate learning_rate = 1e-3;
  double weight_decay = 0.004;
  // Keras's exclude_from_weight_decay(var_names=...): a variable whose name contains a match of one
  // of these patterns (ECMAScript regular expressions, searched as Python's re.search) is not
  // decayed; e.g. {"bias", "gamma", "beta", "embeddings"} spares biases, norms and embeddings.
  std::vector<std::string> exclude_from_weight_decay{};
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  std::optional<double> clipnorm{};
  std::optional<double> global_clipnorm{};
  std::optional<bool> fused{};  // as AdamOptions::fused
};
std::shared_ptr<Optimizer> AdamW(const AdamWOptions& options = {});

struct RMSpropOptions {
  LearningRate learning_rate = 1e-3;
  double rho = 0.9;
  double momentum = 0;
  double epsilon = 1e-7;
  bool centered = false;
  std::optional<double> clipnorm{};
  std::optional<double> global_clipnorm{};
};
std::shared_ptr<Optimizer> RMSprop(const RMSpropOptions& options = {});

// By Keras name with default arguments: "sgd", "adam", "adamw", "rmsprop".
std::shared_ptr<Optimizer> get_optimizer(const std::string& name, double learning_rate);

}  // namespace nimbus::train
