"""``nimbus.keras.activations``: the activations the engine's layers take, by Keras's names.

A layer's ``activation=`` takes a name (``'relu'``) or one of these functions,
which the layer maps back to its name: the activation runs inside the engine's
layer, so a Python function of one's own cannot be a layer's activation.
"""
from nimbus import _nimbus

NAMES = ("linear", "relu", "sigmoid", "tanh", "softmax", "log_softmax", "gelu", "softplus", "silu", "swish")


def _apply(name, x):
    return _nimbus.apply_activation(name, x)


def _refuse(function, argument, value, supported):
    raise ValueError(f"keras.activations.{function}: {argument}={value!r} is not supported; "
                     f"Nimbus's {function} takes only {supported}")


def linear(x):
    return x


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    if alpha != 0.0 or max_value is not None or threshold != 0.0:
        _refuse("relu", "alpha/max_value/threshold", (alpha, max_value, threshold), "the plain max(x, 0)")
    return _apply("relu", x)


def sigmoid(x):
    return _apply("sigmoid", x)


def tanh(x):
    return _apply("tanh", x)


def softmax(x, axis=-1):
    if axis != -1:
        _refuse("softmax", "axis", axis, "axis=-1")
    return _apply("softmax", x)


def log_softmax(x, axis=-1):
    if axis != -1:
        _refuse("log_softmax", "axis", axis, "axis=-1")
    return _apply("log_softmax", x)


def gelu(x, approximate=False):
    if approximate:
        _refuse("gelu", "approximate", approximate, "the exact (erf) form, approximate=False")
    return _apply("gelu", x)


def softplus(x):
    return _apply("softplus", x)


def silu(x):
    return _apply("silu", x)


def swish(x):
    return _apply("swish", x)


def serialize(activation):
    """The name of an activation given as a name, one of these functions, or None (linear)."""
    return _activation_name(activation)


def deserialize(name):
    return get(name)


def get(identifier):
    """The function of an activation name (None is linear), or the function itself."""
    return globals()[_activation_name(identifier)]


def _activation_name(activation, owner="keras.activations", argument="activation"):
    """The engine's name of ``activation``; ValueError naming ``owner`` and ``argument`` otherwise."""
    if activation is None:
        return "linear"
    name = activation if isinstance(activation, str) else getattr(activation, "__name__", None)
    if name in NAMES:
        return name
    raise ValueError(f"{owner}: {argument}={activation!r} is not an activation Nimbus's layers run; "
                     f"they take {', '.join(NAMES)} (by name or as keras.activations.<name>)")
