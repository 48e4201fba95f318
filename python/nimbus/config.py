"""``nimbus.config``: the runtime's process-wide switches under TensorFlow's names (``tf.config``)."""
import types

from nimbus import _nimbus


def run_functions_eagerly(run_eagerly):
    """With True, ``nimbus.function``s (and Keras's training steps) run their Python eagerly, untraced."""
    _nimbus.set_graph_mode(not run_eagerly)


def functions_run_eagerly():
    """Whether ``run_functions_eagerly(True)`` is in effect."""
    return not _nimbus.graph_mode()


def _set_jit(enabled):
    """Fusion of elementwise ops for functions traced from now on without ``jit_compile``.

    True or "autoclustering" turns it on, False or "" off (TensorFlow's values); it is on by default.
    """
    if enabled not in (True, False, "autoclustering", ""):
        raise ValueError(f"set_jit: {enabled!r} is not True, False, 'autoclustering' or ''")
    _nimbus.set_jit(bool(enabled))


def _get_jit():
    """'autoclustering' when fusion is on, '' when off (TensorFlow's values)."""
    return "autoclustering" if _nimbus.jit() else ""


optimizer = types.SimpleNamespace(set_jit=_set_jit, get_jit=_get_jit)
