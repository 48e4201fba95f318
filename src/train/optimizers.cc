#include "nimbus/train/optimizers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <regex>
#include <tuple>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/optimizer_updates.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"

namespace nimbus::train {

namespace {
// Step-dependent scalars are computed in f64 (1 - 0.999^t loses most of its
// digits in f32 at small t) and cast to the variable's dtype at the end.
Tensor f64(double value) { return Tensor::scalar<double>(value); }

class ExponentialDecaySchedule : public LearningRateSchedule {
 public:
  explicit ExponentialDecaySchedule(ExponentialDecayOptions options) : options_(options) {
    if (options.decay_steps <= 0) throw InvalidArgument("ExponentialDecay: decay_steps must be positive");
  }
  Tensor operator()(const Tensor& step) const override {
    Tensor p = cast(step, DType::kF64) / double(options_.decay_steps);
    if (options_.staircase) p = p - (p - cast(cast(p, DType::kI64), DType::kF64));  // floor for p >= 0
    return exp(p * std::log(options_.decay_rate)) * options_.initial_learning_rate;
  }

 private:
  ExponentialDecayOptions options_;
};

class CosineDecaySchedule : public LearningRateSchedule {
 public:
  explicit CosineDecaySchedule(CosineDecayOptions options) : options_(options) {
    if (options.decay_steps <= 0) throw InvalidArgument("CosineDecay: decay_steps must be positive");
  }
  Tensor operator()(const Tensor& step_in) const override {
    const Tensor step = cast(step_in, DType::kF64);
    const double peak = options_.warmup_target.value_or(options_.initial_learning_rate);
    const Tensor after_warmup = clip(step - double(options_.warmup_steps), 0, double(options_.decay_steps));
    const Tensor cosine = (cos(after_warmup * (std::numbers::pi / double(options_.decay_steps))) + 1.0) * 0.5;
    Tensor decayed = (cosine * (1 - options_.alpha) + options_.alpha) * peak;
    if (!options_.warmup_target || options_.warmup_steps <= 0) return decayed;
    const Tensor warmup = step * ((peak - options_.initial_learning_rate) / double(options_.warmup_steps)) +
                          options_.initial_learning_rate;
    return where(less(step, scalar_like(step, double(options_.warmup_steps))), warmup, decayed);
  }

 private:
  CosineDecayOptions options_;
};

class PiecewiseConstantDecaySchedule : public LearningRateSchedule {
 public:
  explicit PiecewiseConstantDecaySchedule(PiecewiseConstantDecayOptions options) : options_(std::move(options)) {
    if (options_.values.size() != options_.boundaries.size() + 1) {
      throw InvalidArgument(fmt::format("PiecewiseConstantDecay: {} values for {} boundaries", options_.values.size(),
                                        options_.boundaries.size()),
                            "give one value more than boundaries: the rate before the first and after each");
    }
    if (!std::is_sorted(options_.boundaries.begin(), options_.boundaries.end())) {
      throw InvalidArgument("PiecewiseConstantDecay: boundaries must be in increasing order");
    }
  }
  Tensor operator()(const Tensor& step_in) const override {
    const Tensor step = cast(step_in, DType::kF64);
    Tensor rate = scalar_like(step, options_.values.back());
    for (size_t i = options_.boundaries.size(); i-- > 0;) {
      rate = where(less_equal(step, scalar_like(step, double(options_.boundaries[i]))),
                   scalar_like(step, options_.values[i]), rate);
    }
    return rate;
  }

 private:
  PiecewiseConstantDecayOptions options_;
};

// "Adam: beta_1 must be in [0, 1), got 1.5": an argument outside its range (NaN is outside every range).
void require(bool in_range, const std::string& optimizer, const char* argument, const char* range, double value) {
  if (!in_range) {
    throw InvalidArgument(fmt::format("{}: {} must be {}, got {}", optimizer, argument, range, value),
                          fmt::format("give {} {}", argument, range));
  }
}

// Sum of squares in f64 (from f32 for the half types, whose squares overflow).
Tensor squared_norm(const Tensor& g) {
  const Tensor wide = g.dtype() == DType::kF16 || g.dtype() == DType::kBF16 ? cast(g, DType::kF32) : g;
  return cast(sum(square(wide)), DType::kF64);
}
}  // namespace

double LearningRateSchedule::at(int64_t step) const { return (*this)(f64(double(step))).item<double>(); }

std::shared_ptr<LearningRateSchedule> ExponentialDecay(const ExponentialDecayOptions& options) {
  return std::make_shared<ExponentialDecaySchedule>(options);
}

std::shared_ptr<LearningRateSchedule> CosineDecay(const CosineDecayOptions& options) {
  return std::make_shared<CosineDecaySchedule>(options);
}

std::shared_ptr<LearningRateSchedule> PiecewiseConstantDecay(const PiecewiseConstantDecayOptions& options) {
  return std::make_shared<PiecewiseConstantDecaySchedule>(options);
}

Tensor LearningRate::operator()(const Tensor& step) const {
  return schedule_ ? cast((*schedule_)(step), DType::kF64) : f64(value_);
}

double LearningRate::at(int64_t step) const { return schedule_ ? schedule_->at(step) : value_; }

Optimizer::Optimizer(std::string name, LearningRate learning_rate, ClipOptions clip)
    : name_(std::move(name)), learning_rate_(std::move(learning_rate)), clip_(clip) {
  if (clip_.clipnorm && clip_.global_clipnorm) {
    throw InvalidArgument(fmt::format("{}: set clipnorm or global_clipnorm, not both", name_));
  }
  if (clip_.clipnorm)
    require(*clip_.clipnorm > 0 && std::isfinite(*clip_.clipnorm), name_, "clipnorm", "> 0", *clip_.clipnorm);
  if (clip_.global_clipnorm) {
    require(*clip_.global_clipnorm > 0 && std::isfinite(*clip_.global_clipnorm), name_, "global_clipnorm", "> 0",
            *clip_.global_clipnorm);
  }
  if (!learning_rate_.is_schedule()) {
    const double rate = learning_rate_.at(0);
    // 0 is allowed, as in PyTorch and Keras: a run that evaluates the starting weights.
    require(rate >= 0 && std::isfinite(rate), name_, "learning_rate", "a finite number >= 0", rate);
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::build(const std::vector<Variable>& variables) {
  if (built_) return;
  // The step counter and rate live with the variables (on a GPU too), so the update runs there whole.
  // (Tensor::to, since Tensor::scalar's device argument keeps any CPU device as cpu:0.)
  const Device device = variables.empty() ? Device::cpu() : variables[0].value().device();
  iterations_ = Variable(Tensor::scalar<int64_t>(0).to(device), name_ + "/iterations", false);
  // A constant rate lives in a variable, so callbacks can change it between steps of a traced step function.
  if (!learning_rate_.is_schedule()) {
    learning_rate_value_ =
        Variable(Tensor::scalar<double>(learning_rate_.at(0)).to(device), name_ + "/learning_rate", false);
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    variable_ids_.push_back(variables[i].value().id());
    build_slots(i, variables[i]);
  }
  built_ = true;
}

Variable Optimizer::add_slot(const Variable& variable, const std::string& slot_name) {
  Variable slot(zeros_like(variable.value()), name_ + "/" + variable.name() + "/" + slot_name, false);
  slots_.push_back(slot);
  return slot;
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> result = {iterations_};
  if (learning_rate_value_.defined()) result.push_back(learning_rate_value_);
  result.insert(result.end(), slots_.begin(), slots_.end());
  return result;
}

double Optimizer::current_learning_rate() const {
  if (learning_rate_value_.defined()) return learning_rate_value_.value().item<double>();
  return learning_rate_.at(built_ ? iterations_.value().item<int64_t>() : 0);
}

void Optimizer::set_learning_rate(double value) {
  if (learning_rate_.is_schedule()) {
    throw InvalidArgument(fmt::format("{}: the learning rate follows a schedule and cannot be set", name_));
  }
  learning_rate_ = LearningRate(value);
  if (learning_rate_value_.defined()) {
    learning_rate_value_.assign(Tensor::scalar<double>(value));  // copied to its device
  }
}

std::vector<Tensor> Optimizer::clip_gradients(const std::vector<Tensor>& gradients) const {
  std::vector<Tensor> result = gradients;
  if (clip_.clipnorm) {
    const double limit = *clip_.clipnorm;
    for (Tensor& g : result) {
      if (!g.defined()) continue;
      const Tensor norm = sqrt(squared_norm(g));
      g = g * cast(scalar_like(norm, limit) / maximum(norm, scalar_like(norm, limit)), g.dtype());
    }
  } else if (clip_.global_clipnorm) {
    Tensor squares;
    for (const Tensor& g : result) {
      if (!g.defined()) continue;
      const Tensor s = squared_norm(g);
      squares = squares.defined() ? squares + s : s;
    }
    if (!squares.defined()) return result;
    const Tensor global = sqrt(squares);
    const Tensor limit = scalar_like(global, *clip_.global_clipnorm);
    const Tensor factor = limit / maximum(global, limit);
    for (Tensor& g : result) {
      if (g.defined()) g = g * cast(factor, g.dtype());
    }
  }
  return result;
}

void Optimizer::apply_gradients(const std::vector<Tensor>& gradients, const std::vector<Variable>& variables) {
  if (gradients.size() != variables.size()) {
    throw InvalidArgument(fmt::format("{}: {} gradients for {} variables", name_, gradients.size(), variables.size()));
  }
  if (!built_) build(variables);
  if (variables.size() != variable_ids_.size()) {
    throw InvalidArgument(
        fmt::format("{}: built for {} variables, applied to {}", name_, variable_ids_.size(), variables.size()),
        "use one optimizer per set of variables");
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    if (variables[i].value().id() != variable_ids_[i]) {
      throw InvalidArgument(fmt::format("{}: variable {} ('{}') is not the one the optimizer was built for", name_, i,
                                        variables[i].name()));
    }
  }
  const std::vector<Tensor> clipped = clip_gradients(gradients);
  const Tensor iterations = cast(iterations_.value(), DType::kF64);
  const Tensor lr = learning_rate_value_.defined() ? learning_rate_value_.value() : learning_rate_(iterations);
  const Tensor step = iterations + 1.0;
  std::vector<size_t> with_gradients;
  for (size_t i = 0; i < variables.size(); ++i) {
    if (clipped[i].defined()) with_gradients.push_back(i);
  }
  update_all(with_gradients, variables, clipped, lr, step);
  // Where the counter is now: the trainer may have moved a restored optimizer's state since build().
  iterations_.assign_add(Tensor::scalar<int64_t>(1).to(iterations_.value().device()));
}

void Optimizer::update_all(const std::vector<size_t>& indices, const std::vector<Variable>& variables,
                           const std::vector<Tensor>& gradients, const Tensor& lr, const Tensor& step) {
  for (size_t i : indices) update(i, variables[i], gradients[i], lr, step);
}

namespace {

class SGDOptimizer : public Optimizer {
 public:
  explicit SGDOptimizer(const SGDOptions& options)
      : Optimizer("SGD", options.learning_rate, {options.clipnorm, options.global_clipnorm}), options_(options) {
    require(options.momentum >= 0 && options.momentum <= 1, name(), "momentum", "in [0, 1]", options.momentum);
  }
  std::shared_ptr<Optimizer> clone() const override { return std::make_shared<SGDOptimizer>(options_); }

 protected:
  void build_slots(size_t, const Variable& variable) override {
    if (options_.momentum > 0) velocities_.push_back(add_slot(variable, "momentum"));
  }
  void update(size_t index, Variable w, const Tensor& g, const Tensor& lr_f64, const Tensor&) override {
    const Tensor lr = cast(lr_f64, w.dtype());
    if (options_.momentum == 0) {
      w.assign_sub(g * lr);
      return;
    }
    Variable& v = velocities_[index];
    const Tensor new_v = v.value() * options_.momentum - g * lr;
    v.assign(new_v);
    w.assign_add(options_.nesterov ? new_v * options_.momentum - g * lr : new_v);
  }

 private:
  SGDOptions options_;
  std::vector<Variable> velocities_;
};

class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(std::string name, const AdamWOptions& options)
      : Optimizer(std::move(name), options.learning_rate, {options.clipnorm, options.global_clipnorm}),
        options_(options) {
    require(options.beta_1 >= 0 && options.beta_1 < 1, this->name(), "beta_1", "in [0, 1)", options.beta_1);
    require(options.beta_2 >= 0 && options.beta_2 < 1, this->name(), "beta_2", "in [0, 1)", options.beta_2);
    require(options.epsilon >= 0 && std::isfinite(options.epsilon), this->name(), "epsilon", "a finite number >= 0",
            options.epsilon);
    require(options.weight_decay >= 0 && std::isfinite(options.weight_decay), this->name(), "weight_decay",
            "a finite number >= 0", options.weight_decay);
    for (const std::string& pattern : options.exclude_from_weight_decay) {
      try {
        excluded_.emplace_back(pattern);
      } catch (const std::regex_error& error) {
        throw InvalidArgument(fmt::format("{}: exclude_from_weight_decay: '{}' is not a regular expression: {}",
                                          this->name(), pattern, error.what()));
      }
    }
  }
  std::shared_ptr<Optimizer> clone() const override { return std::make_shared<AdamOptimizer>(name(), options_); }

 protected:
  void build_slots(size_t, const Variable& variable) override {
    m_.push_back(add_slot(variable, "m"));
    v_.push_back(add_slot(variable, "v"));
    decayed_.push_back(options_.weight_decay != 0 &&
                       std::none_of(excluded_.begin(), excluded_.end(), [&](const std::regex& pattern) {
                         return std::regex_search(variable.name(), pattern);
                       }));
  }
  void update(size_t index, Variable w, const Tensor& g, const Tensor& lr_f64, const Tensor& step) override {
    const double b1 = options_.beta_1, b2 = options_.beta_2;
    if (decayed_[index]) w.assign_sub(w.value() * cast(decay(lr_f64), w.dtype()));
    const Tensor alpha = cast(step_size(lr_f64, step), w.dtype());
    Variable& m = m_[index];
    Variable& v = v_[index];
    const Tensor new_m = m.value() + (g - m.value()) * (1 - b1);
    const Tensor new_v = v.value() + (square(g) - v.value()) * (1 - b2);
    m.assign(new_m);
    v.assign(new_v);
    w.assign_sub(new_m * alpha / (sqrt(new_v) + options_.epsilon));
  }

  // One adam_update per (device, dtype) group of the variables that take the fused update; the rest
  // through update().
  void update_all(const std::vector<size_t>& indices, const std::vector<Variable>& variables,
                  const std::vector<Tensor>& gradients, const Tensor& lr, const Tensor& step) override {
    // (device, dtype, decayed) -> variables; adam_update decays all of a call's variables or none.
    std::map<std::tuple<std::string, DType, bool>, std::vector<size_t>> groups;
    for (size_t i : indices) {
      if (fused_for(variables[i], step.device())) {
        groups[{variables[i].value().device().to_string(), variables[i].dtype(), decayed_[i]}].push_back(i);
      } else {
        update(i, variables[i], gradients[i], lr, step);
      }
    }
    if (groups.empty()) return;
    const Tensor alpha = step_size(lr, step), lr_decay = decay(lr);
    for (const auto& [key, group] : groups) {
      const AdamUpdateOptions options{.beta_1 = options_.beta_1,
                                      .beta_2 = options_.beta_2,
                                      .epsilon = options_.epsilon,
                                      .weight_decay = std::get<2>(key)};
      std::vector<Tensor> w, m, v, g;
      for (size_t i : group) {
        w.push_back(variables[i].value());
        m.push_back(m_[i].value());
        v.push_back(v_[i].value());
        g.push_back(gradients[i]);
      }
      // adam_update bypasses Variable::assign, so it takes the conditional-update scope as an input: the
      // whole update is skipped under a loss scale's inf or NaN gradients (apply_if_finite), as assign would.
      adam_update(w, m, v, g, alpha, lr_decay, options, ConditionalUpdateScope::current());
    }
  }

 private:
  // The step-dependent factors are f64 scalars (1 - 0.999^t loses its digits in f32).
  // alpha = lr sqrt(1 - b2^t) / (1 - b1^t)
  Tensor step_size(const Tensor& lr_f64, const Tensor& step) const {
    const Tensor bias_1 = 1.0 - exp(step * std::log(options_.beta_1));
    const Tensor bias_2 = 1.0 - exp(step * std::log(options_.beta_2));
    return lr_f64 * sqrt(bias_2) / bias_1;
  }
  // AdamW's decoupled decay factor, lr weight_decay.
  Tensor decay(const Tensor& lr_f64) const { return lr_f64 * options_.weight_decay; }

  // Whether `variable` takes the fused update (AdamOptions::fused). Its slots and the step scalars
  // live on the device of the step counter; a variable elsewhere keeps the unfused ops.
  bool fused_for(const Variable& variable, Device counter_device) const {
    if (options_.fused == false) return false;
    const Device device = variable.value().device();
    const std::vector<KernelDef>& kernels = adam_update_kernels(device, variable.dtype());
    if (options_.fused == true) {
      if (kernels.empty()) {
        throw InvalidArgument(
            fmt::format("{}: fused: variable '{}' is {} on {}, and adam_update has no kernel for that", name(),
                        variable.name(), dtype_name(variable.dtype()), device.to_string()),
            "leave fused unset (the unfused update serves every floating dtype) or keep the variables in f32");
      }
      return device == counter_device;
    }
    // Unset: fused where it is faster, that is where a backend registered a kernel above the reference one.
    return device == counter_device && !kernels.empty() && kernels.front().priority > kReferencePriority;
  }

  // The registry's adam_update kernels for this device and dtype, highest priority first.
  static const std::vector<KernelDef>& adam_update_kernels(Device device, DType dtype) {
    return OpRegistry::global().get("adam_update").kernels(device.type, dtype);
  }

  AdamWOptions options_;
  std::vector<std::regex> excluded_;  // exclude_from_weight_decay, compiled
  std::vector<Variable> m_, v_;
  std::vector<bool> decayed_;  // per variable: whether weight decay applies
};

class RMSpropOptimizer : public Optimizer {
 public:
  explicit RMSpropOptimizer(const RMSpropOptions& options)
      : Optimizer("RMSprop", options.learning_rate, {options.clipnorm, options.global_clipnorm}), options_(options) {
    require(options.rho >= 0 && options.rho < 1, name(), "rho", "in [0, 1)", options.rho);
    require(options.momentum >= 0 && options.momentum <= 1, name(), "momentum", "in [0, 1]", options.momentum);
    require(options.epsilon >= 0 && std::isfinite(options.epsilon), name(), "epsilon", "a finite number >= 0",
            options.epsilon);
  }
  std::shared_ptr<Optimizer> clone() const override { return std::make_shared<RMSpropOptimizer>(options_); }

 protected:
  void build_slots(size_t, const Variable& variable) override {
    velocity_.push_back(add_slot(variable, "velocity"));
    if (options_.momentum > 0) momentum_.push_back(add_slot(variable, "momentum"));
    if (options_.centered) average_.push_back(add_slot(variable, "average_gradient"));
  }
  void update(size_t index, Variable w, const Tensor& g, const Tensor& lr_f64, const Tensor&) override {
    const double rho = options_.rho;
    const Tensor lr = cast(lr_f64, w.dtype());
    Variable& velocity = velocity_[index];
    const Tensor new_velocity = velocity.value() * rho + square(g) * (1 - rho);
    velocity.assign(new_velocity);
    Tensor denominator = new_velocity + options_.epsilon;
    if (options_.centered) {
      Variable& average = average_[index];
      const Tensor new_average = average.value() * rho + g * (1 - rho);
      average.assign(new_average);
      denominator = denominator - square(new_average);
    }
    const Tensor increment = g * lr / sqrt(denominator);
    if (options_.momentum > 0) {
      Variable& momentum = momentum_[index];
      const Tensor new_momentum = momentum.value() * options_.momentum + increment;
      momentum.assign(new_momentum);
      w.assign_sub(new_momentum);
    } else {
      w.assign_sub(increment);
    }
  }

 private:
  RMSpropOptions options_;
  std::vector<Variable> velocity_, momentum_, average_;
};

}  // namespace

std::shared_ptr<Optimizer> SGD(const SGDOptions& options) { return std::make_shared<SGDOptimizer>(options); }

std::shared_ptr<Optimizer> Adam(const AdamOptions& options) {
  return std::make_shared<AdamOptimizer>("Adam", AdamWOptions{.learning_rate = options.learning_rate,
                                                              .weight_decay = 0,
                                                              .beta_1 = options.beta_1,
                                                              .beta_2 = options.beta_2,
                                                              .epsilon = options.epsilon,
                                                              .clipnorm = options.clipnorm,
                                                              .global_clipnorm = options.global_clipnorm,
                                                              .fused = options.fused});
}

std::shared_ptr<Optimizer> AdamW(const AdamWOptions& options) {
  return std::make_shared<AdamOptimizer>("AdamW", options);
}

std::shared_ptr<Optimizer> RMSprop(const RMSpropOptions& options) {
  return std::make_shared<RMSpropOptimizer>(options);
}

namespace {
// Default options but the learning rate.
template <typename Options>
Options with_rate(double learning_rate) {
  Options options;
  options.learning_rate = learning_rate;
  return options;
}
}  // namespace

std::shared_ptr<Optimizer> get_optimizer(const std::string& name, double learning_rate) {
  if (name == "sgd" || name == "SGD") return SGD(with_rate<SGDOptions>(learning_rate));
  if (name == "adam" || name == "Adam") return Adam(with_rate<AdamOptions>(learning_rate));
  if (name == "adamw" || name == "AdamW") return AdamW(with_rate<AdamWOptions>(learning_rate));
  if (name == "rmsprop" || name == "RMSprop") return RMSprop(with_rate<RMSpropOptions>(learning_rate));
  throw InvalidArgument(fmt::format("unknown optimizer '{}'", name), "use one of sgd, adam, adamw, rmsprop");
}

}  // namespace nimbus::train
