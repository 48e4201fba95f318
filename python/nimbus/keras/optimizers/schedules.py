"""``nimbus.keras.optimizers.schedules``: learning rates that follow the optimizer's step.

Each is the engine's schedule, which the train step evaluates inside its graph; a
Python subclass of ``LearningRateSchedule`` cannot be traced there, so optimizers
refuse one (a ``LearningRateScheduler`` callback sets the rate per epoch instead).
"""
from nimbus import _nimbus


class LearningRateSchedule:
    """The base class; ``schedule(step)`` is the rate at that step (counted from 0)."""

    _native = None

    def __call__(self, step):
        if self._native is None:
            raise NotImplementedError(f"{type(self).__name__} must implement __call__")
        return _nimbus.constant(self._native.at(int(step)), "float32")

    def get_config(self):
        return dict(self._config)


class ExponentialDecay(LearningRateSchedule):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)``, the exponent floored when ``staircase``."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        self._config = {"initial_learning_rate": initial_learning_rate, "decay_steps": decay_steps,
                        "decay_rate": decay_rate, "staircase": staircase, "name": name}
        self._native = _nimbus.ExponentialDecay(float(initial_learning_rate), int(decay_steps), float(decay_rate),
                                                bool(staircase))


class CosineDecay(LearningRateSchedule):
    """Cosine decay from the peak to ``alpha`` times it over ``decay_steps``, after an optional linear warmup."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None, warmup_target=None,
                 warmup_steps=0):
        self._config = {"initial_learning_rate": initial_learning_rate, "decay_steps": decay_steps, "alpha": alpha,
                        "name": name, "warmup_target": warmup_target, "warmup_steps": warmup_steps}
        self._native = _nimbus.CosineDecay(float(initial_learning_rate), int(decay_steps), float(alpha),
                                           None if warmup_target is None else float(warmup_target),
                                           int(warmup_steps))


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[i]`` up to step ``boundaries[i]`` (inclusive), ``values[-1]`` after the last boundary."""

    def __init__(self, boundaries, values, name=None):
        self._config = {"boundaries": list(boundaries), "values": list(values), "name": name}
        self._native = _nimbus.PiecewiseConstantDecay([int(b) for b in boundaries], [float(v) for v in values])


def serialize(schedule):
    return {"class_name": type(schedule).__name__, "config": schedule.get_config()}
