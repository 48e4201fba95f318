"""``nimbus.GradientTape``: reverse-mode automatic differentiation (``tf.GradientTape``).

The engine's tape (``include/nimbus/autodiff/gradient_tape.h``) records the
ops of the thread that entered the ``with`` block; leaving the block stops the
recording and keeps the tape for ``gradient()``.

    with nimbus.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
"""
import contextlib
import enum

from nimbus import _nimbus, nest


class UnconnectedGradients(enum.Enum):
    """What ``gradient`` gives a source the target does not depend on: None or zeros."""

    NONE = "none"
    ZERO = "zero"


def _as_tensor_or_variable(value, what):
    if isinstance(value, (_nimbus.Tensor, _nimbus.Variable)):
        return value
    raise ValueError(f"{what}: passed in an object of type {type(value).__name__}, not nimbus.Tensor or "
                     "nimbus.Variable")


class GradientTape:
    """Records operations for automatic differentiation (``tf.GradientTape``).

    A non-persistent tape (the default) gives one ``gradient()`` call; a
    persistent one any number. With ``watch_accessed_variables`` the tape
    watches every trainable variable read while it records; tensors are
    watched with ``watch()``.
    """

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = persistent
        self._watch_accessed_variables = watch_accessed_variables
        self._tape = None  # the engine's tape, from the first __enter__ until a non-persistent gradient()
        self._recording = False
        self._watched_variables = ()  # those of a tape gradient() has released

    def __enter__(self):
        if self._tape is None:
            self._tape = _nimbus.GradientTape(self._persistent, self._watch_accessed_variables)
        else:
            self._tape.resume()
        self._recording = True
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self._recording:
            self._tape.pause()
            self._recording = False

    def watch(self, tensor):
        """Watches a tensor, a variable, or a nested structure of them."""
        if self._tape is None:
            raise ValueError("GradientTape.watch() is called outside the tape's `with` block: enter it first")
        for value in nest.flatten(tensor):
            self._tape.watch(_as_tensor_or_variable(value, "GradientTape.watch"))

    @contextlib.contextmanager
    def stop_recording(self):
        """Within this block the tape records nothing."""
        if not self._recording:
            raise ValueError("Tape.stop_recording() can only be called when the tape is recording")
        self._tape.pause()
        self._recording = False
        try:
            yield
        finally:
            self._tape.resume()
            self._recording = True

    def reset(self):
        """Forgets everything recorded, as leaving the block and entering it with a new tape would."""
        if self._tape is None:
            return
        recording = self._recording
        self._watched_variables = ()
        self._tape = None  # the old tape stops observing before the new one starts
        self._tape = _nimbus.GradientTape(self._persistent, self._watch_accessed_variables)
        if not recording:
            self._tape.pause()

    def watched_variables(self):
        """The variables the tape watches, in the order it began to."""
        if self._tape is not None:
            self._watched_variables = tuple(self._tape.watched_variables())
        return self._watched_variables

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """The gradient of ``target`` (a tensor, or a list of them, summed) w.r.t. ``sources``.

        ``sources`` is a tensor, a variable, or any nested structure of them;
        the result has the same structure, with None (or zeros, with
        ``unconnected_gradients=UnconnectedGradients.ZERO``) where the target
        does not depend on the source. ``output_gradients`` seeds each
        target's gradient (ones where None).
        """
        if self._tape is None:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(or jacobians)")
        targets = [_nimbus.constant(t) if isinstance(t, _nimbus.Variable) else _as_tensor_or_variable(t, "target")
                   for t in nest.flatten(target)]
        seeds = [None] * len(targets)
        if output_gradients is not None:
            seeds = [None if seed is None else _nimbus.constant(seed, t.dtype)
                     for seed, t in zip(nest.flatten(output_gradients), targets)]
            if len(seeds) != len(targets):
                raise ValueError(f"{len(nest.flatten(output_gradients))} output gradients for {len(targets)} targets")
        flat_sources = [_as_tensor_or_variable(source, "GradientTape.gradient sources")
                        for source in nest.flatten(sources)]
        zero = UnconnectedGradients(unconnected_gradients) is UnconnectedGradients.ZERO
        grads = self._tape.gradient(targets, flat_sources, seeds, zero)
        if not self._persistent:
            if self._recording:
                self._tape.pause()
                self._recording = False
            self._watched_variables = tuple(self._tape.watched_variables())
            self._tape = None  # frees what it recorded
        return nest.pack_sequence_as(sources, grads)
