"""``nimbus.random``: random tensors from the engine's Philox streams (counter-based, so the same seed
gives the same numbers on any thread count).

TensorFlow's two seeds map so: ``set_seed(s)`` restarts the global stream, which ops without an op
seed draw from; an op seed ``seed=n`` draws from a stream of its own for n, which continues across
calls (two calls with seed=1 differ, as in TensorFlow's eager mode) and restarts at ``set_seed``.
"""
from nimbus import _nimbus
from nimbus._nimbus import DType as _DType
from nimbus.errors import InvalidArgumentError

_streams = {}  # op seed -> its _nimbus._Generator


def set_seed(seed):
    """Restarts the global stream from ``seed`` and every op seed's stream."""
    _nimbus._manual_seed(int(seed))  # pylint: disable=protected-access
    _streams.clear()


def generator_for(seed):
    """The stream an op with this op seed draws from (None: the global one)."""
    if seed is None:
        return None
    if seed not in _streams:
        _streams[seed] = _nimbus._Generator(int(seed))  # pylint: disable=protected-access
    return _streams[seed]


def normal(shape, mean=0.0, stddev=1.0, dtype=_DType.float32, seed=None, name=None):  # pylint: disable=unused-argument
    """Normal values of ``shape`` (a floating dtype)."""
    return _nimbus._random_normal(shape, float(mean), float(stddev), dtype, generator_for(seed))  # pylint: disable=protected-access


def uniform(shape, minval=0, maxval=None, dtype=_DType.float32, seed=None, name=None):  # pylint: disable=unused-argument
    """Uniform values in [minval, maxval) (maxval defaults to 1 for floats; integers need it)."""
    dtype = _nimbus.as_dtype(dtype)
    if _nimbus._tracing_dataset_function():  # pylint: disable=protected-access
        return _dataset_uniform(shape, minval, maxval, dtype)
    if dtype.is_floating:
        high = 1.0 if maxval is None else float(maxval)
        return _nimbus._random_uniform(shape, float(minval), high, dtype, generator_for(seed))  # pylint: disable=protected-access
    if maxval is None:
        raise InvalidArgumentError(f"uniform of {dtype.name} needs maxval", "pass maxval (exclusive)")
    # Integers: floor of a float64 draw in [0, maxval - minval), which truncation gives for non-negatives.
    span = int(maxval) - int(minval)
    if span <= 0:
        raise InvalidArgumentError(f"uniform: minval {minval} is not below maxval {maxval}", "pass minval < maxval")
    draws = _nimbus._random_uniform(shape, 0.0, float(span), _DType.float64, generator_for(seed))  # pylint: disable=protected-access
    return _nimbus.cast(draws, dtype) + _nimbus.constant(int(minval), dtype=dtype)



def _dataset_uniform(shape, minval, maxval, dtype):
    """uniform inside a function Dataset.map traces: a step of its program that draws anew per element."""
    def draw(low, high, draw_dtype):
        return _nimbus._data_op("random_uniform", [], {  # pylint: disable=protected-access
            "shape": [int(d) for d in shape], "low": low, "high": high, "dtype": draw_dtype})[0]

    if dtype.is_floating:
        return draw(float(minval), 1.0 if maxval is None else float(maxval), dtype)
    if maxval is None:
        raise InvalidArgumentError(f"uniform of {dtype.name} needs maxval", "pass maxval (exclusive)")
    # As uniform does: truncating draws in [0, maxval - minval) floors them.
    span = float(int(maxval) - int(minval))
    return _nimbus.cast(draw(0.0, span, _DType.float64), dtype) + _nimbus.constant(int(minval), dtype=dtype)
