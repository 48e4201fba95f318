"""Nimbus from Python, under TensorFlow 2.x's names: ``import nimbus as tf``.

The engine is C++ (the extension ``nimbus._nimbus``); this package gives it
TensorFlow's API. docs/python.md lists the namespaces and every deliberate
difference from TensorFlow.
"""
from nimbus import errors
from nimbus._nimbus import DType, Tensor, Variable, as_dtype, constant
from nimbus.tensor_shape import TensorShape

from nimbus import keras  # pylint: disable=wrong-import-position  (after the names keras uses)

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
