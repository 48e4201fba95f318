"""``nimbus.keras.optimizers``: the engine's optimizers under Keras's names and arguments.

``compile`` hands the optimizer to the trainer, which traces its update into the
train step; ``apply_gradients`` and ``minimize`` run the same update eagerly, for
``GradientTape`` loops.
"""
import numpy as np

from nimbus import _nimbus, distribute, errors
from nimbus.keras.optimizers import schedules


def _learning_rate(value):
    if isinstance(value, schedules.LearningRateSchedule):
        if value._native is None:  # pylint: disable=protected-access
            raise errors.UnimplementedError(
                f"learning_rate: a Python schedule ({type(value).__name__}) cannot be traced into the train step",
                "use keras.optimizers.schedules.ExponentialDecay, CosineDecay or PiecewiseConstantDecay, or set "
                "the rate per epoch with keras.callbacks.LearningRateScheduler")
        return value._native  # pylint: disable=protected-access
    if callable(value):
        raise errors.UnimplementedError("learning_rate: a callable rate is not supported",
                                        "pass a float or a keras.optimizers.schedules object")
    return float(value)


class _LearningRateValue(float):
    """The current rate as Keras shows it (a float with ``numpy()`` and ``assign()``, like TF's variable)."""

    def __new__(cls, value, optimizer):
        self = super().__new__(cls, value)
        self._optimizer = optimizer
        return self

    def numpy(self):
        return np.float32(self)

    def assign(self, value):
        self._optimizer.learning_rate = value


class Optimizer:
    """The base of the optimizers; subclasses make the engine's optimizer from Keras's arguments."""

    def __init__(self, name, learning_rate, clipnorm=None, clipvalue=None, global_clipnorm=None, use_ema=False,
                 jit_compile=True, **kwargs):  # pylint: disable=unused-argument  (jit_compile: always traced)
        if clipvalue is not None:
            raise errors.UnimplementedError(f"{name}: clipvalue is not supported",
                                            "clip by norm with clipnorm or global_clipnorm")
        if use_ema:
            raise errors.UnimplementedError(f"{name}: use_ema is not supported")
        if kwargs:
            raise TypeError(f"{name}: unexpected keyword argument(s) {sorted(kwargs)}")
        self.name = name
        self.clipnorm = clipnorm
        self.global_clipnorm = global_clipnorm
        self._schedule = learning_rate if isinstance(learning_rate, schedules.LearningRateSchedule) else None
        self._native = None  # set by the subclass

    @property
    def iterations(self):
        """Steps taken (an int64 variable once the optimizer has run a step; 0 before)."""
        if not self._native.built:
            return _nimbus.constant(np.int64(0))
        return self._native.iterations

    @property
    def learning_rate(self):
        """The schedule when there is one (as Keras), else the current rate."""
        if self._schedule is not None:
            return self._schedule
        return _LearningRateValue(self._native.current_learning_rate(), self)

    @learning_rate.setter
    def learning_rate(self, value):
        self._native.set_learning_rate(float(value))

    lr = learning_rate

    @property
    def variables(self):
        return self._native.variables

    def build(self, var_list):
        self._native.build(list(var_list))

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False):  # pylint: disable=unused-argument
        """One update of each variable from its gradient (``None`` gradients are skipped); returns the step.

        Inside ``strategy.run`` with several replicas, the gradients are first summed over the replicas (as
        Keras does, unless ``skip_gradients_aggregation``); the local replicas share their variables, so the
        first of them applies the update while the others wait for it.
        """
        pairs = list(grads_and_vars)
        replica = distribute.get_replica_context()
        if replica is None or replica.num_replicas_in_sync == 1:
            self._native.apply_gradients([g for g, _ in pairs], [v for _, v in pairs])
            return self.iterations
        pairs = [(g, v) for g, v in pairs if g is not None]
        gradients = [g if skip_gradients_aggregation else replica.all_reduce(distribute.ReduceOp.SUM, g)
                     for g, _ in pairs]
        if replica.replica_id_in_sync_group % replica.strategy._local_replicas == 0:  # pylint: disable=protected-access
            self._native.apply_gradients(gradients, [v for _, v in pairs])
        _nimbus.replica_barrier()
        return self.iterations

    def compute_gradients(self, loss, var_list, tape=None):
        """``[(gradient, variable)]`` of ``loss`` (a tensor recorded on ``tape``, or a callable) w.r.t. ``var_list``."""
        import nimbus  # pylint: disable=import-outside-toplevel  (nimbus imports keras before GradientTape)
        if callable(loss):
            with nimbus.GradientTape() as tape:
                loss = loss()
        elif tape is None:
            raise ValueError("minimize: a loss tensor needs the tape that recorded it (tape=...)")
        var_list = list(var_list() if callable(var_list) else var_list)
        return list(zip(tape.gradient(loss, var_list), var_list))

    def minimize(self, loss, var_list, tape=None):
        """Computes the gradients of ``loss`` and applies them (Keras's ``minimize``)."""
        return self.apply_gradients(self.compute_gradients(loss, var_list, tape))

    def get_config(self):
        rate = self.learning_rate
        return {"name": self.name, "learning_rate": schedules.serialize(rate) if self._schedule else float(rate),
                "clipnorm": self.clipnorm, "global_clipnorm": self.global_clipnorm, **self._config}


class SGD(Optimizer):
    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None, name="SGD", **kwargs):
        if weight_decay is not None:
            raise errors.UnimplementedError("SGD: weight_decay is not supported", "use AdamW, or Adam(weight_decay=)")
        super().__init__(name, learning_rate, **kwargs)
        self._config = {"momentum": momentum, "nesterov": nesterov}
        self._native = _nimbus.SGD(_learning_rate(learning_rate), float(momentum), bool(nesterov), self.clipnorm,
                                   self.global_clipnorm)


class Adam(Optimizer):
    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False,
                 weight_decay=None, name="Adam", fused=None, **kwargs):
        if amsgrad:
            raise errors.UnimplementedError(f"{name}: amsgrad is not supported")
        super().__init__(name, learning_rate, **kwargs)
        self._config = {"beta_1": beta_1, "beta_2": beta_2, "epsilon": epsilon, "weight_decay": weight_decay}
        self._native = _nimbus.Adam(_learning_rate(learning_rate), float(beta_1), float(beta_2), float(epsilon),
                                    None if weight_decay is None else float(weight_decay), self.clipnorm,
                                    self.global_clipnorm, fused)


class AdamW(Adam):
    """Adam with decoupled weight decay (``weight_decay`` times the rate, subtracted from each weight)."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="AdamW", **kwargs):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, amsgrad, weight_decay=weight_decay, name=name,
                         **kwargs)


class RMSprop(Optimizer):
    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, weight_decay=None,
                 name="RMSprop", **kwargs):
        if weight_decay is not None:
            raise errors.UnimplementedError("RMSprop: weight_decay is not supported", "use AdamW")
        super().__init__(name, learning_rate, **kwargs)
        self._config = {"rho": rho, "momentum": momentum, "epsilon": epsilon, "centered": centered}
        self._native = _nimbus.RMSprop(_learning_rate(learning_rate), float(rho), float(momentum), float(epsilon),
                                       bool(centered), self.clipnorm, self.global_clipnorm)


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier):
    """An optimizer from a name (``'adam'``, default arguments) or an optimizer (returned as it is)."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown optimizer {identifier!r}: use one of {sorted(_BY_NAME)} or an optimizer object")


# TensorFlow 2.11+ keeps the pre-2.11 classes under optimizers.legacy; here they are the same.
class legacy:  # pylint: disable=invalid-name,too-few-public-methods  (a namespace under Keras's name)
    SGD = SGD
    Adam = Adam
    AdamW = AdamW
    RMSprop = RMSprop
    Optimizer = Optimizer
