"""``nimbus.keras.metrics``: the engine's metrics under Keras's names.

A metric keeps running statistics: ``update_state`` adds a batch, ``result`` is
the value over everything since ``reset_state``. Given to ``compile``, the
trainer computes each batch's statistics inside its traced step.
"""
import numpy as np

from nimbus import _nimbus, errors


class Metric:
    """A metric of the engine (``update_state``, ``result``, ``reset_state``)."""

    def __init__(self, kind, name, **arguments):
        self._native = _nimbus.make_metric(kind, name, **arguments)

    @property
    def name(self):
        return self._native.name

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise errors.UnimplementedError(f"{self.name}: sample_weight is not supported")
        self._native.update_state(y_true, y_pred)

    def result(self):
        return _nimbus.constant(np.float32(self._native.result()))

    def reset_state(self):
        self._native.reset_state()

    reset_states = reset_state

    def __call__(self, y_true, y_pred, sample_weight=None):
        self.update_state(y_true, y_pred, sample_weight)
        return self.result()


class Accuracy(Metric):
    """Fraction of elements where ``y_pred`` equals ``y_true``."""

    def __init__(self, name="accuracy", dtype=None):  # pylint: disable=unused-argument  (results are float32)
        super().__init__("Accuracy", name)


class SparseCategoricalAccuracy(Metric):
    def __init__(self, name="sparse_categorical_accuracy", dtype=None):  # pylint: disable=unused-argument
        super().__init__("SparseCategoricalAccuracy", name)


class CategoricalAccuracy(Metric):
    def __init__(self, name="categorical_accuracy", dtype=None):  # pylint: disable=unused-argument
        super().__init__("CategoricalAccuracy", name)


class BinaryAccuracy(Metric):
    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):  # pylint: disable=unused-argument
        super().__init__("BinaryAccuracy", name, threshold=float(threshold))


class SparseTopKCategoricalAccuracy(Metric):
    def __init__(self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None):  # pylint: disable=unused-argument
        super().__init__("SparseTopKCategoricalAccuracy", name, k=int(k))


def _one_threshold(name, thresholds, top_k, class_id):
    if top_k is not None or class_id is not None:
        raise errors.UnimplementedError(f"{name}: top_k and class_id are not supported")
    if thresholds is None:
        return 0.5
    if isinstance(thresholds, (list, tuple)):
        raise errors.UnimplementedError(f"{name}: one threshold only")
    return float(thresholds)


class Precision(Metric):
    def __init__(self, thresholds=None, top_k=None, class_id=None, name="precision", dtype=None):  # pylint: disable=unused-argument
        super().__init__("Precision", name, threshold=_one_threshold(name, thresholds, top_k, class_id))


class Recall(Metric):
    def __init__(self, thresholds=None, top_k=None, class_id=None, name="recall", dtype=None):  # pylint: disable=unused-argument
        super().__init__("Recall", name, threshold=_one_threshold(name, thresholds, top_k, class_id))


class AUC(Metric):
    def __init__(self, num_thresholds=200, curve="ROC", name="auc", **kwargs):
        if curve != "ROC" or any(v not in (None, False) for k, v in kwargs.items() if k not in ("dtype", "from_logits")):
            raise errors.UnimplementedError(f"{name}: only the ROC curve with default arguments is supported")
        if kwargs.get("from_logits"):
            raise errors.UnimplementedError(f"{name}: from_logits is not supported", "pass probabilities")
        super().__init__("AUC", name, num_thresholds=int(num_thresholds))


class Mean(Metric):
    """The (weighted) mean of the values given to ``update_state(values, sample_weight=None)``."""

    def __init__(self, name="mean", dtype=None):  # pylint: disable=unused-argument
        super().__init__("Mean", name)

    def update_state(self, values, sample_weight=None):  # pylint: disable=arguments-renamed  (Keras's signature)
        values = np.asarray(values, np.float32)
        weights = np.ones_like(values) if sample_weight is None else np.broadcast_to(
            np.asarray(sample_weight, np.float32), values.shape)
        self._native.update_state(np.ascontiguousarray(weights), values)

    def __call__(self, values, sample_weight=None):  # pylint: disable=arguments-differ
        self.update_state(values, sample_weight)
        return self.result()


# The functions Keras also accepts in compile(metrics=[...]) (there the engine computes them in the step);
# called directly they give one value per sample, from the tensors' values.
def sparse_categorical_accuracy(y_true, y_pred):
    y_pred = np.asarray(y_pred)
    y_true = np.asarray(y_true).reshape(y_pred.shape[:-1])
    return _nimbus.constant((np.argmax(y_pred, -1) == y_true).astype(np.float32))


def categorical_accuracy(y_true, y_pred):
    return _nimbus.constant((np.argmax(np.asarray(y_pred), -1) == np.argmax(np.asarray(y_true), -1))
                            .astype(np.float32))


def binary_accuracy(y_true, y_pred, threshold=0.5):
    y_pred = np.asarray(y_pred)
    matches = (y_pred > threshold) == (np.asarray(y_true).reshape(y_pred.shape) > 0.5)
    return _nimbus.constant(matches.astype(np.float32).mean(axis=-1))


_FUNCTION_NAMES = {sparse_categorical_accuracy: "sparse_categorical_accuracy",
                   categorical_accuracy: "categorical_accuracy", binary_accuracy: "binary_accuracy"}


def resolve(metrics):
    """``compile``'s metrics as (names the engine resolves, e.g. 'accuracy' by the loss; metric objects)."""
    if metrics is None:
        return [], []
    if isinstance(metrics, dict):
        raise errors.UnimplementedError("compile: metrics per output (a dict) are not supported")
    names, objects = [], []
    for metric in metrics:
        if isinstance(metric, str):
            names.append(metric)
        elif isinstance(metric, Metric):
            objects.append(metric._native)  # pylint: disable=protected-access
        elif metric in _FUNCTION_NAMES:
            names.append(_FUNCTION_NAMES[metric])
        else:
            raise errors.UnimplementedError(
                f"compile: metric {metric!r} is not one of the engine's",
                "use a name ('accuracy', 'auc', ...) or a keras.metrics class; Python-defined metrics are not "
                "supported")
    return names, objects
