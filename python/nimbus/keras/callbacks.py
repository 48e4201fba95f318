"""``nimbus.keras.callbacks``: hooks into ``fit``, under Keras's names and arguments.

Subclass ``Callback`` to run Python at Keras's hooks (epochs and batches counted
from 0, logs as dicts); ``self.model`` is the model being fitted and
``self.model.stop_training = True`` ends ``fit``. The other classes here are the
engine's callbacks, which run inside the C++ loop without the GIL.
"""
import os

from nimbus import _nimbus, errors


class Callback:
    """Keras's base class: override the hooks you need; batch hooks left alone cost the steps nothing."""

    model = None  # for subclasses whose __init__ does not call this one's
    params = {}

    def __init__(self):
        self.model = None
        self.params = {}
        self.validation_data = None

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass

    # evaluate() and predict() call these around their run (the batch hooks are not called: the batches
    # run inside the engine).
    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None, on_batch_end=None,
                 on_train_begin=None, on_train_end=None, **kwargs):
        super().__init__()
        hooks = {"on_epoch_begin": on_epoch_begin, "on_epoch_end": on_epoch_end, "on_batch_begin": on_batch_begin,
                 "on_batch_end": on_batch_end, "on_train_begin": on_train_begin, "on_train_end": on_train_end,
                 **kwargs}
        for hook, function in hooks.items():
            if function is not None:
                setattr(self, hook, function)


class History(Callback):
    """What ``fit`` returns: ``history`` maps each log name to its per-epoch values, ``epoch`` lists the
    epochs run (from 0), ``params`` holds fit's verbose, epochs and steps. ``samples_per_sec`` (a Nimbus
    addition) is the training throughput after the warm-up steps, the trainer's own figure."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []
        self.samples_per_sec = 0.0


class _Native(Callback):
    """An engine callback; fit hands ``_native`` to the C++ loop."""

    _native = None


def _no_verbose(name, verbose):
    if verbose:
        raise errors.UnimplementedError(f"{name}: verbose is not supported", "leave verbose=0")


class EarlyStopping(_Native):
    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        _no_verbose("EarlyStopping", verbose)
        if baseline is not None or start_from_epoch:
            raise errors.UnimplementedError("EarlyStopping: baseline and start_from_epoch are not supported")
        self._native = _nimbus.EarlyStopping(monitor, abs(float(min_delta)), int(patience), mode,
                                             bool(restore_best_weights))


class ReduceLROnPlateau(_Native):
    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0, **kwargs):
        super().__init__()
        _no_verbose("ReduceLROnPlateau", verbose)
        min_delta = kwargs.pop("epsilon", min_delta)  # Keras's old name
        if kwargs:
            raise TypeError(f"ReduceLROnPlateau: unexpected keyword argument(s) {sorted(kwargs)}")
        self._native = _nimbus.ReduceLROnPlateau(monitor, float(factor), int(patience), mode, float(min_delta),
                                                 int(cooldown), float(min_lr))


class LearningRateScheduler(_Native):
    """Sets the rate at each epoch's start to ``schedule(epoch, lr)`` (epoch from 0)."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        _no_verbose("LearningRateScheduler", verbose)
        self._native = _nimbus.LearningRateScheduler(lambda epoch, rate: float(schedule(epoch, rate)))


class CSVLogger(_Native):
    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        if separator != ",":
            raise errors.UnimplementedError("CSVLogger: only the separator ',' is supported")
        self._native = _nimbus.CSVLogger(os.fspath(filename), bool(append))


class TerminateOnNaN(_Native):
    def __init__(self):
        super().__init__()
        self._native = _nimbus.TerminateOnNaN()


def _save_freq(name, save_freq):
    if save_freq == "epoch":
        return 0
    if isinstance(save_freq, int) and save_freq > 0:
        return save_freq
    raise ValueError(f"{name}: save_freq must be 'epoch' or a positive number of steps, got {save_freq!r}")


class ModelCheckpoint(_Native):
    """Writes a training checkpoint (weights, optimizer state, position; a safetensors file) to ``filepath``,
    whose ``{epoch:02d}``, ``{val_loss:.2f}``, ... fields are filled in as Keras fills them. The file is the
    same whether ``save_weights_only`` or not (docs/python.md)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,  # pylint: disable=unused-argument
                 mode="auto", save_freq="epoch", options=None, initial_value_threshold=None):
        super().__init__()
        _no_verbose("ModelCheckpoint", verbose)
        if options is not None or initial_value_threshold is not None:
            raise errors.UnimplementedError("ModelCheckpoint: options and initial_value_threshold are not supported")
        self.filepath = os.fspath(filepath)
        self._native = _nimbus.ModelCheckpoint(self.filepath, monitor, bool(save_best_only), mode,
                                               _save_freq("ModelCheckpoint", save_freq))


class BackupAndRestore(_Native):
    """Keeps a checkpoint in ``backup_dir`` (each epoch, or every ``save_freq`` steps); a ``fit`` that finds
    one there resumes from it, mid-epoch too, and a ``fit`` that ends normally deletes it."""

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, save_before_preemption=False):
        super().__init__()
        if save_before_preemption:
            raise errors.UnimplementedError("BackupAndRestore: save_before_preemption is not supported")
        self.backup_dir = os.fspath(backup_dir)
        self.delete_checkpoint = delete_checkpoint
        self.path = os.path.join(self.backup_dir, "backup.safetensors")
        self._native = _nimbus.ModelCheckpoint(self.path, "loss", False, "auto",
                                               _save_freq("BackupAndRestore", save_freq))

    def _found_backup(self):
        return self.path if os.path.exists(self.path) else None

    def _delete_backup(self):
        if self.delete_checkpoint and os.path.exists(self.path):
            os.remove(self.path)


class TensorBoard(_Native):
    """Scalars (the epoch logs; also batch logs every ``update_freq`` steps) as TensorBoard event files under
    ``log_dir/train`` and ``log_dir/validation``."""

    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False,  # pylint: disable=unused-argument
                 write_steps_per_second=False, update_freq="epoch", profile_batch=0, embeddings_freq=0,
                 embeddings_metadata=None):
        super().__init__()
        if histogram_freq or write_images or write_steps_per_second or profile_batch or embeddings_freq:
            raise errors.UnimplementedError(
                "TensorBoard: only scalars are written (histogram_freq, write_images, write_steps_per_second, "
                "profile_batch and embeddings_freq are not supported)")
        self.log_dir = os.fspath(log_dir)
        update = 0 if update_freq == "epoch" else _save_freq("TensorBoard", update_freq)
        self._native = _nimbus.TensorBoard(self.log_dir, update)
