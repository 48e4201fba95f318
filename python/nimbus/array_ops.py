"""TensorFlow's top-level array functions that are made of several engine ops: stack, unstack, tile,
eye, reverse, shape, size, rank, linspace. Each differentiates through the ops it is made of."""
import numpy as np

from nimbus import _nimbus
from nimbus._nimbus import DType
from nimbus.errors import InvalidArgumentError


def stack(values, axis=0, name=None):  # pylint: disable=unused-argument
    """Joins tensors of one shape along a new axis."""
    tensors = [_nimbus.constant(value) for value in values]
    if not tensors:
        raise InvalidArgumentError("stack of an empty list", "pass at least one tensor")
    rank = tensors[0].ndim
    if not -rank - 1 <= axis <= rank:
        raise InvalidArgumentError(f"stack: axis {axis} is outside [{-rank - 1}, {rank}] for rank-{rank} tensors",
                                   "pass an axis of the stacked result")
    return _nimbus.concat([_nimbus.expand_dims(t, axis) for t in tensors], axis)


def unstack(value, num=None, axis=0, name=None):  # pylint: disable=unused-argument
    """The tensors along ``axis``, as a list."""
    x = _nimbus.constant(value)
    count = x.shape[axis]
    if num is not None and num != count:
        raise InvalidArgumentError(f"unstack: num={num} but axis {axis} of shape {list(x.shape)} has {count}",
                                   "leave num as None")
    return [_nimbus.squeeze(piece, [axis]) for piece in _nimbus.split(x, count, axis=axis)] if count else []


def tile(input, multiples, name=None):  # pylint: disable=redefined-builtin,unused-argument
    """``input`` repeated ``multiples[i]`` times along axis i (a broadcast of an expanded view)."""
    x = _nimbus.constant(input)
    multiples = [int(m) for m in (multiples.numpy() if hasattr(multiples, "numpy") else multiples)]
    dims = list(x.shape)
    if len(multiples) != len(dims):
        raise InvalidArgumentError(f"tile: {len(multiples)} multiples for shape {dims}",
                                   "give one multiple per axis")
    interleaved = [size for dim in dims for size in (1, dim)]
    repeated = [size for multiple, dim in zip(multiples, dims) for size in (multiple, dim)]
    expanded = _nimbus.broadcast_to(_nimbus.reshape(x, interleaved), repeated)
    return _nimbus.reshape(expanded, [multiple * dim for multiple, dim in zip(multiples, dims)])


def eye(num_rows, num_columns=None, batch_shape=None, dtype=DType.float32, name=None):  # pylint: disable=unused-argument
    """Identity matrices: ones on the main diagonal."""
    columns = num_rows if num_columns is None else num_columns
    matrix = _nimbus.cast(_nimbus.equal(_nimbus.reshape(_nimbus.range(num_rows), [-1, 1]),
                                        _nimbus.reshape(_nimbus.range(columns), [1, -1])), dtype)
    if batch_shape:
        matrix = _nimbus.broadcast_to(matrix, list(batch_shape) + [num_rows, columns])
    return matrix


def reverse(tensor, axis, name=None):  # pylint: disable=unused-argument
    """``tensor`` with the order of each axis in ``axis`` reversed (gathers of reversed indices)."""
    x = _nimbus.constant(tensor)
    for each in ([axis] if isinstance(axis, int) else axis):
        x = _nimbus.gather(x, np.arange(x.shape[each] - 1, -1, -1, dtype=np.int64), axis=each)
    return x


def shape(input, out_type=DType.int32, name=None):  # pylint: disable=redefined-builtin,unused-argument
    """The dimensions of ``input`` as a rank-1 tensor."""
    return _nimbus.constant(list(_nimbus.constant(input).shape), dtype=out_type)


def size(input, out_type=DType.int32, name=None):  # pylint: disable=redefined-builtin,unused-argument
    """The number of elements of ``input`` as a scalar tensor."""
    return _nimbus.constant(int(np.prod(_nimbus.constant(input).shape)), dtype=out_type)


def rank(input, name=None):  # pylint: disable=redefined-builtin,unused-argument
    """The number of axes of ``input`` as an int32 scalar tensor."""
    return _nimbus.constant(_nimbus.constant(input).ndim, dtype=DType.int32)


def linspace(start, stop, num, name=None, axis=0):  # pylint: disable=unused-argument
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (float32 for Python numbers)."""
    if axis != 0:
        raise InvalidArgumentError(f"linspace(axis={axis}): scalar start and stop only", "leave axis at 0")
    first = _nimbus.constant(start if not isinstance(start, int) else float(start))
    if num == 1:
        return _nimbus.reshape(first, [1])
    step = (_nimbus.cast(stop, first.dtype) - first) / (num - 1)
    return first + _nimbus.cast(_nimbus.range(num), first.dtype) * step
