"""Nimbus from Python, under TensorFlow 2.x's names: ``import nimbus as tf``.

The engine is C++ (the extension ``nimbus._nimbus``); this package gives it
TensorFlow's API. docs/python.md lists the namespaces and every deliberate
difference from TensorFlow.
"""
from nimbus import errors
from nimbus._nimbus import DType, Tensor, Variable, as_dtype, constant
from nimbus.tensor_shape import TensorShape

from nimbus import keras  # pylint: disable=wrong-import-position  (after the names keras uses)

# Tensors and ops: the engine's ops under TensorFlow's names (python/src/ops.cc, operators.cc and
# dlpack.cc; math.py, nn.py, linalg.py, image.py, random.py, array_ops.py; docs/python.md, "Ops").
# pylint: disable=redefined-builtin,wrong-import-position  (TensorFlow's names: abs, pow, range, slice)
from nimbus._nimbus import (abs, add, add_n, argmax, broadcast_to, cast, clip_by_value, concat, cos, divide, equal,
                            exp, expand_dims, fill, from_dlpack, gather, greater, greater_equal, identity, less,
                            less_equal, log, logical_and, logical_not, logical_or, matmul, maximum, minimum, multiply,
                            negative, not_equal, one_hot, ones, ones_like, pad, pow, range, reduce_max, reduce_mean,
                            reduce_min, reduce_sum, reshape, sigmoid, sign, sin, slice, split, sqrt, square, squeeze,
                            stop_gradient, subtract, tanh, transpose, truediv, where, zeros, zeros_like)
from nimbus import experimental, image, linalg, math, nn, random, tensor_methods
from nimbus.array_ops import eye, linspace, rank, reverse, shape, size, stack, tile, unstack
from nimbus.math import argmin, reduce_all, reduce_any, reduce_logsumexp

float32 = DType.float32
float64 = DType.float64
float16 = DType.float16
bfloat16 = DType.bfloat16
int32 = DType.int32
int64 = DType.int64
uint8 = DType.uint8
bool = DType.bool  # pylint: disable=redefined-builtin  (TensorFlow's name)
double = float64
half = float16

DType.__repr__ = lambda self: f"nimbus.{self.name}"
Tensor.shape = property(lambda self: TensorShape(self._shape), doc="The tensor's dimensions.")
Variable.shape = property(lambda self: TensorShape(self._shape), doc="The variable's dimensions.")


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None):  # pylint: disable=unused-argument
    """A tensor of ``value``; NumPy arrays of a supported dtype are wrapped without a copy."""
    if dtype is None and dtype_hint is not None and not isinstance(value, (Tensor, Variable)):
        dtype = dtype_hint
    return constant(value, dtype)


# Autodiff and graphs (gradient_tape.py, function.py, config.py, nest.py).
# pylint: disable=wrong-import-position
from nimbus import config, nest
from nimbus.function import TensorSpec, function
from nimbus.gradient_tape import GradientTape, UnconnectedGradients

# Devices and distribution (devices.py, distribute.py; docs/python.md, "Config" and "Distribute").
from nimbus import distribute
from nimbus.devices import device
# Input pipelines (data/, io.py, py_function.py; docs/python.md, "nimbus.data").
from nimbus import data, io
from nimbus.py_function import py_function
