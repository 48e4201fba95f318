"""``nimbus.math``: TensorFlow's tf.math over the engine's ops.

Most functions are the C++ op bindings themselves (python/src/ops.cc); the ones defined here are
made of several engine ops and differentiate through them.
"""
# pylint: disable=redefined-builtin  (TensorFlow's names: abs, pow, ...)
from nimbus._nimbus import (abs, add, add_n, argmax, cast, cos, divide, equal, erf, exp, greater, greater_equal,
                            is_finite, less, less_equal, log, log_softmax, logical_and, logical_not, logical_or,
                            matmul, maximum, minimum, multiply, negative, not_equal, pow, reduce_max, reduce_mean,
                            reduce_min, reduce_sum, reduce_variance, rsqrt, sigmoid, sign, sin, softmax, softplus,
                            sqrt, square, subtract, tanh, top_k, truediv, unsorted_segment_sum)
from nimbus._nimbus import DType as _DType
from nimbus._nimbus import constant as _constant
from nimbus._nimbus import where as _where
from nimbus.errors import InvalidArgumentError

_bool, _int32, _int64, _uint8 = _DType.bool, _DType.int32, _DType.int64, _DType.uint8
realdiv = divide  # TensorFlow's other name for it


def argmin(input, axis=None, output_type=_int64, name=None):  # pylint: disable=unused-argument
    """The index of the first minimum along ``axis`` (0 when None, as TensorFlow's default)."""
    x = _constant(input)
    if x.dtype == _uint8:
        x = cast(x, _int32)
    return argmax(negative(x), axis=axis, output_type=output_type)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):  # pylint: disable=unused-argument
    """The population standard deviation (divides by N), as tf.math.reduce_std."""
    return sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):  # pylint: disable=unused-argument
    """Logical or over ``axis`` of a bool tensor."""
    return cast(reduce_max(cast(input_tensor, _uint8), axis=axis, keepdims=keepdims), _bool)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):  # pylint: disable=unused-argument
    """Logical and over ``axis`` of a bool tensor."""
    return cast(reduce_min(cast(input_tensor, _uint8), axis=axis, keepdims=keepdims), _bool)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):  # pylint: disable=unused-argument
    """log(sum(exp(x))) over ``axis``, with the maximum subtracted first for stability."""
    x = _constant(input_tensor)
    peak = reduce_max(x, axis=axis, keepdims=True)
    peak = _where(is_finite(peak), peak, _constant(0, dtype=x.dtype))  # all -inf rows stay -inf
    total = log(reduce_sum(exp(x - peak), axis=axis, keepdims=True)) + peak
    return total if keepdims else reduce_sum(total, axis=axis)  # a sum over size-1 axes drops them


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):  # pylint: disable=unused-argument
    """sqrt(sum(x^2)) over ``axis``."""
    return sqrt(reduce_sum(square(input_tensor), axis=axis, keepdims=keepdims))


def count_nonzero(input, axis=None, keepdims=False, dtype=_int64, name=None):  # pylint: disable=unused-argument
    """How many elements along ``axis`` are not zero."""
    x = _constant(input)
    return reduce_sum(cast(not_equal(x, 0), dtype), axis=axis, keepdims=keepdims)


def squared_difference(x, y, name=None):  # pylint: disable=unused-argument
    """(x - y)^2."""
    return square(subtract(x, y))


def reciprocal(x, name=None):  # pylint: disable=unused-argument
    """1 / x."""
    x = _constant(x)
    return divide(_constant(1, dtype=x.dtype), x)


def log_sigmoid(x, name=None):  # pylint: disable=unused-argument
    """log(sigmoid(x)) = -softplus(-x), stable."""
    return negative(softplus(negative(x)))


def logical_xor(x, y, name=None):  # pylint: disable=unused-argument
    """x != y on bool tensors."""
    if _constant(x).dtype != _bool:
        raise InvalidArgumentError("logical_xor takes bool tensors", "compare or cast first")
    return not_equal(x, y)


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):  # pylint: disable=unused-argument
    """x / sqrt(max(sum(x^2), epsilon)) along ``axis``."""
    x = _constant(x)
    squares = reduce_sum(square(x), axis=axis if dim is None else dim, keepdims=True)
    return multiply(x, rsqrt(maximum(squares, epsilon)))


def divide_no_nan(x, y, name=None):  # pylint: disable=unused-argument
    """x / y, and 0 where y is 0."""
    y = _constant(y)
    zero = equal(y, 0)
    safe = _where(zero, _constant(1, dtype=y.dtype), y)
    return _where(zero, _constant(0, dtype=y.dtype), divide(x, safe))

