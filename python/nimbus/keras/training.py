"""``compile``, ``fit``, ``evaluate`` and ``predict`` of ``nimbus.keras.Model``, over the engine's trainer.

The training loop is the engine's (the same one ``nimbus train`` runs): ``fit``
hands it the NumPy arrays (wrapped, not copied, when they are C-contiguous
float32 / int32 / int64) and runs without the GIL, taking it back at step ends
only, for Python callbacks, the progress bar and Ctrl-C (KeyboardInterrupt).
"""
import math

import numpy as np

from nimbus import _nimbus, distribute, errors
from nimbus.data.dataset import Dataset
from nimbus.keras import callbacks as callbacks_module
from nimbus.keras import losses, metrics as metrics_module, optimizers


def _unsupported(what, value, default=None):
    if value is not default:
        raise errors.UnimplementedError(f"{what} is not supported", "leave it at its default")


def _features(x):
    """x as the engine takes it: float64 arrays (``x / 255.0``) become float32, Keras's float type (a copy)."""
    if isinstance(x, (_nimbus.Tensor, _nimbus.Variable)):
        return x
    if isinstance(x, (dict, list, tuple)) and not isinstance(x, np.ndarray):
        if isinstance(x, (list, tuple)) and len(x) == 1:
            return _features(x[0])
        raise errors.UnimplementedError("fit/evaluate/predict: only one input array is supported",
                                        "models with several inputs are not supported by fit yet")
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == np.float64 else x


def _targets(y):
    """y as the engine takes it: integer labels of other widths (uint8, as fashion_mnist gives) become int32."""
    if isinstance(y, (_nimbus.Tensor, _nimbus.Variable)):
        return y
    y = np.asarray(y)
    if y.dtype == np.float64:
        return y.astype(np.float32)
    if y.dtype.kind in "iub" and y.dtype not in (np.int32, np.int64):
        return y.astype(np.int32)
    return y


def _length(x):
    return x.shape[0]


def _arrays_of(dataset, what):
    """A dataset of (x, y) batches as two arrays (evaluate and validation run on arrays)."""
    batches = list(dataset.as_numpy_iterator())
    if not batches or not isinstance(batches[0], tuple) or len(batches[0]) != 2:
        raise ValueError(f"{what}: a dataset's elements must be (x, y) batches, got {dataset.element_spec}")
    return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])


def _dataset_steps(dataset, steps_per_epoch):
    count = dataset.cardinality().numpy()
    steps = steps_per_epoch if count < 0 else count
    return steps if steps_per_epoch is None else min(steps, int(steps_per_epoch))


def _scores(names, logs, return_dict):
    """Keras's form of a result: a dict, or [loss, *metrics], or the loss alone without metrics."""
    if return_dict:
        return {name: logs[name] for name in names}
    values = [logs[name] for name in names]
    return values[0] if len(values) == 1 else values


def _verbosity(verbose):
    return 1 if verbose == "auto" else int(verbose)


class TrainingMixin:
    """Keras's training methods; ``Model`` and ``Sequential`` take them from here."""

    _trainer = None
    _predict_trainer = None
    _run_eagerly = False
    _jit_compile = None
    _stop_training = False
    history = None
    optimizer = None
    loss = None

    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=None, steps_per_execution=None, jit_compile=None, **kwargs):
        """Configures training: the optimizer, the loss and the metrics, by Keras name or object.

        ``jit_compile`` turns the train step's fusion on or off (None: the runtime's default, on);
        ``run_eagerly=True`` runs every step eagerly instead of as a traced graph. ``steps_per_execution``
        is accepted and has no effect: every step already runs inside the engine's loop.
        """
        _unsupported("compile: loss_weights", loss_weights)
        _unsupported("compile: weighted_metrics", weighted_metrics)
        if kwargs:
            raise TypeError(f"compile: unexpected keyword argument(s) {sorted(kwargs)}")
        if steps_per_execution is not None and int(steps_per_execution) < 1:
            raise ValueError(f"compile: steps_per_execution must be >= 1, got {steps_per_execution}")
        self.optimizer = optimizers.get(optimizer)
        self.loss = loss
        names, objects = metrics_module.resolve(metrics)
        # A model made in a strategy's scope trains with it, wherever it is compiled (as in Keras).
        self.distribute_strategy = getattr(self, "distribute_strategy", None) or distribute._scope_strategy()  # pylint: disable=protected-access
        self._trainer = _nimbus.Trainer(self._model, self.optimizer._native, losses.get(loss), names,  # pylint: disable=protected-access
                                        objects, getattr(self.distribute_strategy, "_native", None))
        self._run_eagerly = bool(run_eagerly)
        self._jit_compile = jit_compile

    # The step settings: graph unless run_eagerly, fusion as jit_compile says (None: the runtime's).
    def _graph(self):
        return False if self._run_eagerly else None

    def _compiled(self, what):
        if self._trainer is None:
            raise RuntimeError(f"You must compile your model before {what}. Call model.compile(optimizer, loss).")
        return self._trainer

    @staticmethod
    def _check_dataset(dataset):
        spec = dataset.element_spec
        if not isinstance(spec, tuple) or len(spec) != 2 or any(isinstance(s, (tuple, list, dict)) for s in spec):
            raise errors.UnimplementedError(
                f"fit: the dataset's elements must be (x, y) batches of one tensor each, got {spec}",
                "map them to (features, labels), e.g. dataset.map(lambda d: (d['image'], d['label']))")

    @property
    def stop_training(self):
        """Set to True (from a callback) to end ``fit`` after the current step."""
        return self._trainer.stop_training if self._trainer is not None else self._stop_training

    @stop_training.setter
    def stop_training(self, value):
        if self._trainer is not None:
            self._trainer.stop_training = bool(value)
        else:
            self._stop_training = bool(value)

    @property
    def metrics_names(self):
        return self._trainer.metrics_names if self._trainer is not None else []

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1,
            max_queue_size=10, workers=1, use_multiprocessing=False):  # pylint: disable=unused-argument
        """Trains on NumPy arrays (or tensors) and returns a ``History``.

        ``validation_batch_size`` is accepted and unused: validation runs in the training batch size, and
        its results do not depend on the batch. ``max_queue_size``, ``workers`` and
        ``use_multiprocessing`` concern Python generators, which fit does not take.
        """
        trainer = self._compiled("training/fitting")
        _unsupported("fit: class_weight", class_weight)
        _unsupported("fit: sample_weight", sample_weight)
        _unsupported("fit: validation_steps", validation_steps)
        if validation_freq != 1:
            raise errors.UnimplementedError("fit: validation_freq is not supported", "validation runs every epoch")
        if not isinstance(shuffle, bool):
            raise errors.UnimplementedError(f"fit: shuffle={shuffle!r} is not supported", "use True or False")
        dataset = x if isinstance(x, Dataset) else None
        if dataset is not None:
            if y is not None or validation_split:
                raise ValueError("fit: a dataset x holds the targets and cannot be split; pass y=None and "
                                 "validation_data")
            self._check_dataset(dataset)
            x = dataset._engine  # pylint: disable=protected-access
        elif y is None:
            raise errors.UnimplementedError("fit: x without y (a generator) is not supported",
                                            "pass NumPy arrays x and y, or a nimbus.data.Dataset of (x, y)")
        else:
            x, y = _features(x), _targets(y)
        if isinstance(validation_data, Dataset):
            validation_data = _arrays_of(validation_data, "fit: validation_data")
        if validation_split and validation_data is None:
            if not 0 < validation_split < 1:
                raise ValueError(f"fit: validation_split must be in [0, 1), got {validation_split}")
            # Keras's split: the last samples, before any shuffling (NumPy views, not copies).
            split_at = int(math.floor(_length(x) * (1.0 - validation_split)))
            validation_data = (x[split_at:], y[split_at:])
            x, y = x[:split_at], y[:split_at]
        if validation_data is not None:
            if len(validation_data) == 3 and validation_data[2] is not None:
                raise errors.UnimplementedError("fit: validation sample weights are not supported")
            validation_data = (_features(validation_data[0]), _targets(validation_data[1]))

        callbacks = list(callbacks or [])
        for callback in callbacks:
            callback.set_model(self)
        backups = [c for c in callbacks if isinstance(c, callbacks_module.BackupAndRestore)]
        resume_from = next((b._found_backup() for b in backups if b._found_backup()), None)  # pylint: disable=protected-access
        batch_size = 32 if batch_size is None else int(batch_size)
        verbose = _verbosity(verbose)
        result = trainer.fit(x, y, {
            "epochs": int(epochs), "batch_size": batch_size, "shuffle": shuffle, "initial_epoch": int(initial_epoch),
            "steps_per_epoch": steps_per_epoch, "graph": self._graph(), "jit": self._jit_compile, "seed": None,
            "validation_data": validation_data, "verbose": verbose,
            "callbacks": [c for c in callbacks if not isinstance(c, callbacks_module.History)],
            "resume_from": resume_from})
        for backup in backups:
            backup._delete_backup()  # pylint: disable=protected-access

        history = next((c for c in callbacks if isinstance(c, callbacks_module.History)), callbacks_module.History())
        history.set_model(self)
        history.history = result["history"]
        history.epoch = result["epoch"]
        if dataset is not None:
            steps = _dataset_steps(dataset, steps_per_epoch)
        else:
            steps = math.ceil(_length(x) / batch_size)
            steps = steps if steps_per_epoch is None else min(steps, int(steps_per_epoch))
        history.set_params({"verbose": verbose, "epochs": int(epochs), "steps": steps})
        history.samples_per_sec = result["samples_per_sec"]
        self.history = history
        return history

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, max_queue_size=10, workers=1, use_multiprocessing=False,  # pylint: disable=unused-argument
                 return_dict=False):
        """The loss and metrics over (x, y): ``[loss, *metrics]`` (the loss alone without metrics), or a dict."""
        trainer = self._compiled("evaluating")
        _unsupported("evaluate: sample_weight", sample_weight)
        callbacks = list(callbacks or [])
        for callback in callbacks:
            callback.set_model(self)
            callback.on_test_begin({})
        if isinstance(x, Dataset):
            x, y = _arrays_of(x, "evaluate")
        logs = trainer.evaluate(_features(x), _targets(y), 32 if batch_size is None else int(batch_size), steps,
                                self._graph(), self._jit_compile)
        for callback in callbacks:
            callback.on_test_end(dict(logs))
        return _scores(trainer.metrics_names, logs, return_dict)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, max_queue_size=10,  # pylint: disable=unused-argument
                workers=1, use_multiprocessing=False):
        """The model's outputs for x (inference mode) as a NumPy array, run batch by batch in the engine."""
        if self._trainer is not None:
            trainer = self._trainer
        else:  # predict() before compile(), as Keras allows: a trainer whose optimizer and loss never run
            if self._predict_trainer is None:
                self._predict_trainer = _nimbus.Trainer(self._model, optimizers.SGD()._native, losses.get("mse"),  # pylint: disable=protected-access
                                                        [], [])
            trainer = self._predict_trainer
        callbacks = list(callbacks or [])
        for callback in callbacks:
            callback.set_model(self)
            callback.on_predict_begin({})
        if isinstance(x, Dataset):
            x = np.concatenate([element[0] if isinstance(element, tuple) else element
                                for element in x.as_numpy_iterator()])
        outputs = trainer.predict(_features(x), 32 if batch_size is None else int(batch_size), steps, self._graph(),
                                  self._jit_compile)
        for callback in callbacks:
            callback.on_predict_end({})
        return outputs

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, reset_metrics=True,
                       return_dict=False):
        """One optimizer step on this batch; its loss and metrics."""
        trainer = self._compiled("training")
        _unsupported("train_on_batch: sample_weight", sample_weight)
        _unsupported("train_on_batch: class_weight", class_weight)
        if not reset_metrics:
            raise errors.UnimplementedError("train_on_batch: reset_metrics=False is not supported")
        return _scores(trainer.metrics_names, trainer.train_on_batch(_features(x), _targets(y)), return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, reset_metrics=True, return_dict=False):
        """The loss and metrics of this batch."""
        _unsupported("test_on_batch: sample_weight", sample_weight)
        if not reset_metrics:
            raise errors.UnimplementedError("test_on_batch: reset_metrics=False is not supported")
        x = _features(x)
        return self.evaluate(x, y, batch_size=max(1, _length(x)), return_dict=return_dict)

    def predict_on_batch(self, x):
        x = _features(x)
        return self.predict(x, batch_size=max(1, _length(x)))
