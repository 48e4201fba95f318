"""``nimbus.py_function``: Python code inside a function that ``Dataset.map`` traces (``tf.py_function``).

A dataset function is traced once into the engine's ops, which the pipeline's threads run without the
GIL. What cannot be traced (NumPy, Python control flow on values) goes in ``py_function``: ``func`` is
called with tensors holding values, under the GIL, for every element, so the calls of all the
pipeline's threads take turns: it serializes the pipeline. Outside a dataset function it calls
``func`` at once.
"""
from nimbus import _nimbus, nest


def py_function(func, inp, Tout, name=None):  # pylint: disable=invalid-name,unused-argument
    """``func(*inp)`` run in Python; ``Tout`` is its result's dtype, or a list of dtypes for several."""
    dtypes = [_nimbus.as_dtype(dtype) for dtype in nest.flatten(Tout)]

    def call(tensors):
        results = func(*tensors)
        return [_nimbus.constant(value, dtype) for value, dtype in zip(nest.flatten(results), dtypes)]

    outputs = _nimbus._data_op("py_function", [_nimbus.constant(x) for x in inp],  # pylint: disable=protected-access
                               {"fn": call, "dtypes": dtypes})
    return outputs if isinstance(Tout, (list, tuple)) else outputs[0]
