"""``nimbus.nn``: TensorFlow's tf.nn over the engine's ops.

The activations, losses, convolution and pooling are the C++ op bindings (python/src/ops.cc); the
functions defined here are made of several engine ops and differentiate through them.
"""
from nimbus import _nimbus
from nimbus import random as _random
from nimbus._nimbus import (avg_pool2d, conv2d, gelu, log_softmax, max_pool2d, relu, sigmoid, softmax,
                            softmax_cross_entropy_with_logits, softplus, sparse_softmax_cross_entropy_with_logits,
                            tanh, top_k)
from nimbus.errors import InvalidArgumentError, UnimplementedError
from nimbus.math import l2_normalize, log_sigmoid  # noqa: F401  (tf.nn has them too)

_constant = _nimbus.constant

# tf.nn.max_pool / avg_pool take any rank; Nimbus pools 2-D windows of 4-D inputs.
max_pool = max_pool2d
avg_pool = avg_pool2d


def relu6(features, name=None):  # pylint: disable=unused-argument
    """min(max(x, 0), 6)."""
    return _nimbus.clip_by_value(features, 0, 6)


def leaky_relu(features, alpha=0.2, name=None):  # pylint: disable=unused-argument
    """x where x > 0, alpha x elsewhere."""
    x = _constant(features)
    return _nimbus.where(x > 0, x, x * alpha)


def elu(features, name=None):  # pylint: disable=unused-argument
    """x where x > 0, exp(x) - 1 elsewhere."""
    x = _constant(features)
    return _nimbus.where(x > 0, x, _nimbus.exp(_nimbus.minimum(x, 0)) - 1)


def selu(features, name=None):  # pylint: disable=unused-argument
    """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al. (2017)."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    x = _constant(features)
    return scale * _nimbus.where(x > 0, x, alpha * (_nimbus.exp(_nimbus.minimum(x, 0)) - 1))


def silu(features, beta=1.0):
    """x * sigmoid(beta x) (swish)."""
    x = _constant(features)
    return x * sigmoid(x * beta if beta != 1.0 else x)


swish = silu


def softsign(features, name=None):  # pylint: disable=unused-argument
    """x / (1 + |x|)."""
    x = _constant(features)
    return x / (_nimbus.abs(x) + 1)


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):  # pylint: disable=unused-argument
    """Per-element logistic loss, computed stably as max(x, 0) - x z + log(1 + exp(-|x|))."""
    x = _constant(logits)
    z = _nimbus.cast(labels, x.dtype) if not isinstance(labels, (int, float)) else labels
    return _nimbus.maximum(x, 0) - x * z + softplus(-_nimbus.abs(x))


def bias_add(value, bias, data_format=None, name=None):  # pylint: disable=unused-argument
    """value + bias along the channel axis: the last one, or axis 1 with data_format 'NCHW' / 'NC...'."""
    x = _constant(value)
    b = _constant(bias)
    if data_format is not None and data_format.startswith("NC") and x.ndim > 2:
        b = _nimbus.reshape(b, [-1] + [1] * (x.ndim - 2))
    return x + b


def moments(x, axes, shift=None, keepdims=False, name=None):  # pylint: disable=unused-argument
    """(mean, variance) over ``axes``; the variance is the population one (divides by N)."""
    x = _constant(x)
    return (_nimbus.reduce_mean(x, axis=axes, keepdims=keepdims),
            _nimbus.reduce_variance(x, axis=axes, keepdims=keepdims))


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):  # pylint: disable=unused-argument
    """(x - mean) / sqrt(variance + epsilon) * scale + offset, all broadcast against x."""
    x = _constant(x)
    inverse = _nimbus.rsqrt(_nimbus.add(variance, variance_epsilon))
    if scale is not None:
        inverse = inverse * scale
    y = (x - mean) * inverse
    return y + offset if offset is not None else y


def l2_loss(t, name=None):  # pylint: disable=unused-argument
    """sum(t^2) / 2."""
    return _nimbus.reduce_sum(_nimbus.square(t)) / 2


def embedding_lookup(params, ids, max_norm=None, name=None):  # pylint: disable=unused-argument
    """The rows of ``params`` picked by ``ids`` (a gather along axis 0)."""
    if max_norm is not None:
        raise UnimplementedError("embedding_lookup(max_norm=...)", "clip the rows with nimbus.clip_by_norm yourself")
    return _nimbus.gather(params, ids)


def dropout(x, rate, noise_shape=None, seed=None, name=None):  # pylint: disable=unused-argument
    """Zeroes each element with probability ``rate`` and scales the rest by 1 / (1 - rate).

    The mask comes from nimbus.random's stream for ``seed`` (the global one when None).
    """
    if noise_shape is not None:
        raise UnimplementedError("dropout(noise_shape=...): the engine draws one mask entry per element",
                                 "leave noise_shape as None")
    if not 0 <= rate < 1:
        raise InvalidArgumentError(f"dropout rate {rate} is outside [0, 1)", "pass a probability below 1")
    return _nimbus._dropout(x, rate, _random.generator_for(seed))  # pylint: disable=protected-access


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """The per-example losses summed and divided by the global batch size (for custom loops under a strategy).

    Without ``global_batch_size``: this replica's batch times the replicas in sync.
    """
    from nimbus import distribute  # pylint: disable=import-outside-toplevel  (distribute imports nimbus's modules)
    losses = _nimbus.constant(per_example_loss)
    if sample_weight is not None:
        losses = losses * sample_weight
    if global_batch_size is None:
        replica = distribute.get_replica_context()
        replicas = replica.num_replicas_in_sync if replica is not None else distribute.get_strategy().num_replicas_in_sync
        global_batch_size = int(losses.shape[0]) * replicas
    return _nimbus.reduce_sum(losses) / float(global_batch_size)
