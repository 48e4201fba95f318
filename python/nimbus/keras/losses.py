"""``nimbus.keras.losses``: the engine's losses under Keras's names, as classes and functions.

A class instance called on ``(y_true, y_pred)`` gives the mean over the batch (Keras's
``sum_over_batch_size``); the functions give one value per sample. Both compute
with the engine's ops, so they also work on the tensors of a ``GradientTape``.
"""
from nimbus import _nimbus, errors

_REDUCTIONS = ("auto", "sum_over_batch_size", "none")


class Reduction:  # pylint: disable=too-few-public-methods  (Keras's names for the reductions)
    AUTO = "auto"
    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"


class Loss:
    """A loss of the engine; ``loss(y_true, y_pred)`` is the batch mean (or per sample with ``reduction='none'``)."""

    def __init__(self, native, reduction="auto", name=None):
        if reduction not in _REDUCTIONS:
            raise errors.UnimplementedError(f"loss reduction {reduction!r} is not supported",
                                            f"use one of {list(_REDUCTIONS)}")
        self._native = native
        self.reduction = reduction
        self.name = name or native.name

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise errors.UnimplementedError(f"{self.name}: sample_weight is not supported")
        if self.reduction == "none":
            return self._native.per_sample(y_true, y_pred)
        return self._native(y_true, y_pred)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, **self._config}


def _check_supported(name, ignore_class=None, axis=-1):
    if ignore_class is not None:
        raise errors.UnimplementedError(f"{name}: ignore_class is not supported")
    if axis != -1:
        raise errors.UnimplementedError(f"{name}: only axis=-1 (the last) is supported")


class SparseCategoricalCrossentropy(Loss):
    def __init__(self, from_logits=False, ignore_class=None, reduction="auto",
                 name="sparse_categorical_crossentropy"):
        _check_supported(name, ignore_class)
        self._config = {"from_logits": from_logits}
        super().__init__(_nimbus.make_loss("sparse_categorical_crossentropy", from_logits), reduction, name)


class CategoricalCrossentropy(Loss):
    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto",
                 name="categorical_crossentropy"):
        _check_supported(name, axis=axis)
        self._config = {"from_logits": from_logits, "label_smoothing": label_smoothing}
        super().__init__(_nimbus.make_loss("categorical_crossentropy", from_logits, float(label_smoothing)),
                         reduction, name)


class BinaryCrossentropy(Loss):
    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name="binary_crossentropy"):
        _check_supported(name, axis=axis)
        self._config = {"from_logits": from_logits, "label_smoothing": label_smoothing}
        super().__init__(_nimbus.make_loss("binary_crossentropy", from_logits, float(label_smoothing)), reduction,
                         name)


class MeanSquaredError(Loss):
    def __init__(self, reduction="auto", name="mean_squared_error"):
        self._config = {}
        super().__init__(_nimbus.make_loss("mean_squared_error"), reduction, name)


class MeanAbsoluteError(Loss):
    def __init__(self, reduction="auto", name="mean_absolute_error"):
        self._config = {}
        super().__init__(_nimbus.make_loss("mean_absolute_error"), reduction, name)


class Huber(Loss):
    def __init__(self, delta=1.0, reduction="auto", name="huber_loss"):
        self._config = {"delta": delta}
        super().__init__(_nimbus.make_loss("huber", delta=float(delta)), reduction, name)


# The functions: one value per sample.
def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1, ignore_class=None):
    _check_supported("sparse_categorical_crossentropy", ignore_class, axis)
    return _nimbus.make_loss("sparse_categorical_crossentropy", from_logits).per_sample(y_true, y_pred)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    _check_supported("categorical_crossentropy", axis=axis)
    return _nimbus.make_loss("categorical_crossentropy", from_logits,
                             float(label_smoothing)).per_sample(y_true, y_pred)


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    _check_supported("binary_crossentropy", axis=axis)
    return _nimbus.make_loss("binary_crossentropy", from_logits, float(label_smoothing)).per_sample(y_true, y_pred)


def mean_squared_error(y_true, y_pred):
    return _nimbus.make_loss("mean_squared_error").per_sample(y_true, y_pred)


def mean_absolute_error(y_true, y_pred):
    return _nimbus.make_loss("mean_absolute_error").per_sample(y_true, y_pred)


def huber(y_true, y_pred, delta=1.0):
    return _nimbus.make_loss("huber", delta=float(delta)).per_sample(y_true, y_pred)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error

# Keras's string names and functions, by the engine's loss name (from_logits=False, as Keras's strings).
_NAMES = {
    "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
    "categorical_crossentropy": "categorical_crossentropy",
    "binary_crossentropy": "binary_crossentropy",
    "mean_squared_error": "mean_squared_error", "mse": "mean_squared_error",
    "mean_absolute_error": "mean_absolute_error", "mae": "mean_absolute_error",
    "huber": "huber", "huber_loss": "huber",
}
_FUNCTIONS = {sparse_categorical_crossentropy: "sparse_categorical_crossentropy",
              categorical_crossentropy: "categorical_crossentropy", binary_crossentropy: "binary_crossentropy",
              mean_squared_error: "mean_squared_error", mean_absolute_error: "mean_absolute_error", huber: "huber"}


def get(identifier):
    """The engine's loss for ``compile``: a Keras name, a Loss instance, one of the functions above, or any
    Python function of ``(y_true, y_pred)`` that computes with nimbus ops (called when the step is traced)."""
    if isinstance(identifier, Loss):
        if identifier.reduction == "none":
            raise ValueError(f"compile: loss {identifier.name} has reduction='none'; the trainer takes the batch mean")
        return identifier._native  # pylint: disable=protected-access
    if isinstance(identifier, str):
        if identifier not in _NAMES:
            raise ValueError(f"unknown loss {identifier!r}: use one of {sorted(_NAMES)} or a keras.losses object")
        return _nimbus.make_loss(_NAMES[identifier])
    if identifier in _FUNCTIONS:
        return _nimbus.make_loss(_FUNCTIONS[identifier])
    if callable(identifier):
        return _nimbus.python_loss(getattr(identifier, "__name__", "loss"), identifier)
    if identifier is None:
        raise ValueError("compile: no loss; pass loss='sparse_categorical_crossentropy' or a keras.losses object")
    raise TypeError(f"compile: cannot use {identifier!r} as a loss"
                    + (" (one loss per output is not supported)" if isinstance(identifier, (dict, list)) else ""))
