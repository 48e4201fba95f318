// Optimizers and learning-rate schedules (train/optimizers.h) for nimbus.keras.optimizers: the
// engine's objects, made here from Keras's arguments, which python/nimbus/keras/optimizers.py checks
// and names as Keras does.
#include "nimbus/train/optimizers.h"

#include <fmt/format.h>

#include "bindings.h"
#include "nimbus/base/error.h"

namespace nimbus::python {
namespace {

using train::LearningRate;
using train::LearningRateSchedule;
using train::Optimizer;

// A float or a schedule made by this module.
LearningRate learning_rate_of(const py::handle& value) {
  if (py::isinstance<LearningRateSchedule>(value)) return value.cast<std::shared_ptr<LearningRateSchedule>>();
  if (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value)) return value.cast<double>();
  throw InvalidArgument(
      fmt::format("learning_rate must be a number or a schedule, got {}", py::repr(value).cast<std::string>()),
      "pass a float or a nimbus.keras.optimizers.schedules object");
}

std::optional<double> optional_double(const py::handle& value) {
  return value.is_none() ? std::nullopt : std::optional<double>(value.cast<double>());
}

std::optional<bool> optional_bool(const py::handle& value) {
  return value.is_none() ? std::nullopt : std::optional<bool>(value.cast<bool>());
}

}  // namespace

void bind_optimizers(py::module_& m) {
  py::class_<LearningRateSchedule, std::shared_ptr<LearningRateSchedule>>(m, "LearningRateSchedule")
      .def("at", &LearningRateSchedule::at, py::arg("step"));
  m.def(
      "ExponentialDecay",
      [](double initial, int64_t decay_steps, double decay_rate, bool staircase) {
        return train::ExponentialDecay({.initial_learning_rate = initial,
                                        .decay_steps = decay_steps,
                                        .decay_rate = decay_rate,
                                        .staircase = staircase});
      },
      py::arg("initial_learning_rate"), py::arg("decay_steps"), py::arg("decay_rate"), py::arg("staircase"));
  m.def(
      "CosineDecay",
      [](double initial, int64_t decay_steps, double alpha, const py::object& warmup_target, int64_t warmup_steps) {
        return train::CosineDecay({.initial_learning_rate = initial,
                                   .decay_steps = decay_steps,
                                   .alpha = alpha,
                                   .warmup_target = optional_double(warmup_target),
                                   .warmup_steps = warmup_steps});
      },
      py::arg("initial_learning_rate"), py::arg("decay_steps"), py::arg("alpha"), py::arg("warmup_target"),
      py::arg("warmup_steps"));
  m.def(
      "PiecewiseConstantDecay",
      [](const std::vector<int64_t>& boundaries, const std::vector<double>& values) {
        return train::PiecewiseConstantDecay({.boundaries = boundaries, .values = values});
      },
      py::arg("boundaries"), py::arg("values"));

  py::class_<Optimizer, std::shared_ptr<Optimizer>>(m, "Optimizer")
      .def_property_readonly("name", &Optimizer::name)
      .def_property_readonly("built", &Optimizer::built)
      .def_property_readonly("iterations", &Optimizer::iterations)
      .def_property_readonly("variables", &Optimizer::variables)
      .def("current_learning_rate", &Optimizer::current_learning_rate)
      .def("set_learning_rate", &Optimizer::set_learning_rate, py::arg("value"))
      .def("build", &Optimizer::build, py::arg("variables"))
      .def(
          "apply_gradients",
          [](Optimizer& optimizer, const std::vector<py::object>& gradients, const std::vector<Variable>& variables) {
            // None (a variable the loss does not reach) stays undefined, which the optimizer skips.
            std::vector<Tensor> tensors;
            for (const py::object& gradient : gradients) {
              tensors.push_back(gradient.is_none() ? Tensor() : to_tensor(gradient));
            }
            const py::gil_scoped_release release;
            optimizer.apply_gradients(tensors, variables);
          },
          py::arg("gradients"), py::arg("variables"));

  const auto clip = [](const py::object& clipnorm, const py::object& global_clipnorm) {
    return std::pair{optional_double(clipnorm), optional_double(global_clipnorm)};
  };
  m.def(
      "SGD",
      [clip](const py::object& lr, double momentum, bool nesterov, const py::object& clipnorm,
             const py::object& global_clipnorm) {
        const auto [norm, global] = clip(clipnorm, global_clipnorm);
        return train::SGD({.learning_rate = learning_rate_of(lr),
                           .momentum = momentum,
                           .nesterov = nesterov,
                           .clipnorm = norm,
                           .global_clipnorm = global});
      },
      py::arg("learning_rate"), py::arg("momentum"), py::arg("nesterov"), py::arg("clipnorm"),
      py::arg("global_clipnorm"));
  m.def(
      "Adam",
      [clip](const py::object& lr, double beta_1, double beta_2, double epsilon, const py::object& weight_decay,
             const py::object& clipnorm, const py::object& global_clipnorm, const py::object& fused) {
        const auto [norm, global] = clip(clipnorm, global_clipnorm);
        const train::AdamOptions adam{.learning_rate = learning_rate_of(lr),
                                      .beta_1 = beta_1,
                                      .beta_2 = beta_2,
                                      .epsilon = epsilon,
                                      .clipnorm = norm,
                                      .global_clipnorm = global,
                                      .fused = optional_bool(fused)};
        if (weight_decay.is_none()) return train::Adam(adam);
        // Keras's weight_decay on Adam is AdamW's decoupled decay.
        return train::AdamW({.learning_rate = adam.learning_rate,
                             .weight_decay = weight_decay.cast<double>(),
                             .beta_1 = adam.beta_1,
                             .beta_2 = adam.beta_2,
                             .epsilon = adam.epsilon,
                             .clipnorm = adam.clipnorm,
                             .global_clipnorm = adam.global_clipnorm,
                             .fused = adam.fused});
      },
      py::arg("learning_rate"), py::arg("beta_1"), py::arg("beta_2"), py::arg("epsilon"), py::arg("weight_decay"),
      py::arg("clipnorm"), py::arg("global_clipnorm"), py::arg("fused"));
  m.def(
      "RMSprop",
      [clip](const py::object& lr, double rho, double momentum, double epsilon, bool centered,
             const py::object& clipnorm, const py::object& global_clipnorm) {
        const auto [norm, global] = clip(clipnorm, global_clipnorm);
        return train::RMSprop({.learning_rate = learning_rate_of(lr),
                               .rho = rho,
                               .momentum = momentum,
                               .epsilon = epsilon,
                               .centered = centered,
                               .clipnorm = norm,
                               .global_clipnorm = global});
      },
      py::arg("learning_rate"), py::arg("rho"), py::arg("momentum"), py::arg("epsilon"), py::arg("centered"),
      py::arg("clipnorm"), py::arg("global_clipnorm"));
}

}  // namespace nimbus::python
