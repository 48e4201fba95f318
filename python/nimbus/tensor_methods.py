"""What nimbus.Tensor and nimbus.Variable do in Python beyond the operators bound in C++
(python/src/operators.cc): indexing with ints, slices, Ellipsis and None; iteration; and reading
a scalar as a Python bool, int or float, as TensorFlow's eager tensors do.

Indexing is made of ops, so it records on a GradientTape and traces inside nimbus.function: a
step-1 slice is the slice op, another step (negative ones included) a gather of the picked indices.
"""
import operator

import numpy as np

from nimbus import _nimbus
from nimbus._nimbus import Tensor, Variable
from nimbus.errors import InvalidArgumentError


def _index_error(message, hint="index with ints, slices, ..., None (newaxis); nimbus.gather picks arbitrary indices"):
    return InvalidArgumentError(message, hint)


def _getitem(tensor, key):
    """tensor[key], for ints, slices (any step), Ellipsis and None, as NumPy and TensorFlow index."""
    if isinstance(tensor, Variable):
        tensor = tensor.value()
    items = list(key) if isinstance(key, tuple) else [key]
    dims = tensor._shape  # pylint: disable=protected-access
    indexed = [item for item in items if item is not None and item is not Ellipsis]
    if sum(item is Ellipsis for item in items) > 1:
        raise _index_error(f"an index may hold one Ellipsis, {key!r} holds more")
    if len(indexed) > len(dims):
        raise _index_error(f"index {key!r} has {len(indexed)} entries for a tensor of shape {list(dims)}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(dims) - len(indexed))
    items += [slice(None)] * (len(dims) - sum(item is not None for item in items))

    begin, size, squeezed, strided, new_axes = [], [], [], [], []
    axis = 0  # of the input
    output_axis = 0  # of the result, counting new axes
    for item in items:
        if item is None:
            new_axes.append(output_axis)
            output_axis += 1
            continue
        dim = dims[axis]
        if dim < 0:  # a dimension a dataset function's trace does not know (docs/python.md, "nimbus.data")
            raise _index_error(f"indexing axis {axis} of shape {list(dims)}, whose length is known only when the "
                               "dataset's map runs", "index along axes of known length, or fix the length first "
                               "(nimbus.reshape, nimbus.image.resize, a crop)")
        if isinstance(item, slice):
            start, stop, step = item.indices(dim)
            picked = range(start, stop, step)
            if step == 1 or len(picked) == 0:
                begin.append(start if len(picked) else 0)
                size.append(len(picked))
            else:
                begin.append(0)
                size.append(dim)
                strided.append((axis, picked))
            output_axis += 1
        else:
            try:
                index = operator.index(item)
            except TypeError:
                raise _index_error(f"cannot index a tensor with {type(item).__name__} {item!r}") from None
            if not -dim <= index < dim:
                raise _index_error(f"index {index} is out of bounds for axis {axis} of size {dim} (shape {list(dims)})",
                                   f"use an index in [{-dim}, {dim})")
            begin.append(index % dim)
            size.append(1)
            squeezed.append(axis)
        axis += 1

    result = tensor
    if any(b != 0 for b in begin) or any(s != d for s, d in zip(size, dims)):
        result = _nimbus.slice(result, begin, size)
    for strided_axis, picked in strided:
        result = _nimbus.gather(result, np.asarray(picked, np.int64), axis=strided_axis)
    if squeezed:
        result = _nimbus.squeeze(result, squeezed)
    for new_axis in new_axes:
        result = _nimbus.expand_dims(result, new_axis)
    return result


def _iter(tensor):
    value = tensor.value() if isinstance(tensor, Variable) else tensor
    if value.ndim == 0:
        raise TypeError("iterating over a 0-d tensor")
    if value._shape[0] == 0:  # pylint: disable=protected-access
        return iter(())
    return iter([_nimbus.squeeze(piece, [0]) for piece in _nimbus.split(value, value._shape[0], axis=0)])  # pylint: disable=protected-access


def _scalar(tensor):
    """The value of a tensor (or variable) as a NumPy scalar or array."""
    return np.asarray(tensor.value() if isinstance(tensor, Variable) else tensor)


def _index(tensor):
    value = _scalar(tensor)
    if value.ndim != 0 or value.dtype.kind not in "iu":
        raise TypeError(f"only integer scalar tensors can be used as an index, not shape {list(value.shape)} "
                        f"dtype {value.dtype}")
    return int(value)


def _format(tensor, spec):
    value = _scalar(tensor)
    return format(value[()] if value.ndim == 0 else str(value), spec)


class Reference:
    """A hashable reference to a tensor or variable (TensorFlow's ``tensor.ref()``), equal only to another
    reference of the same object."""

    def __init__(self, wrapped):
        self._wrapped = wrapped

    def deref(self):
        return self._wrapped

    def __eq__(self, other):
        return isinstance(other, Reference) and other._wrapped is self._wrapped

    def __hash__(self):
        return id(self._wrapped)


for _class in (Tensor, Variable):
    _class.__getitem__ = _getitem
    _class.__iter__ = _iter
    _class.__bool__ = lambda self: bool(_scalar(self))
    _class.__float__ = lambda self: float(_scalar(self))
    _class.__int__ = lambda self: int(_scalar(self))
    _class.__index__ = _index
    _class.__format__ = _format
    _class.ref = Reference
    _class.experimental_ref = Reference
    _class.get_shape = lambda self: self.shape

Variable.__array__ = lambda self, dtype=None: np.asarray(self.value(), dtype)
Variable.__len__ = lambda self: len(self.value())
Variable.ndim = property(lambda self: self.value().ndim)
