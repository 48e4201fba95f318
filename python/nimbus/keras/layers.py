"""``nimbus.keras.layers``: the engine's layers under Keras's names and arguments.

Each class maps Keras's constructor arguments (positional forms and defaults
included) onto the layer's Keras config, from which the engine makes the layer
(``nn::layer_from_config``). An argument the engine lacks is refused, naming
the layer and the argument, never ignored: a TypeError for an unknown keyword,
a ValueError for a Keras argument Nimbus supports only at its default.
"""
import inspect
import json
import weakref

import numpy as np

from nimbus import _nimbus
from nimbus.keras import initializers, regularizers
from nimbus.keras.activations import _activation_name
from nimbus.keras.mixed_precision import Policy
from nimbus.tensor_shape import TensorShape

_nimbus.KerasTensor.shape = property(lambda self: TensorShape(self._shape), doc="Dimensions; None for the batch.")

# The Python object of each engine layer, by the engine layer's identity: model.layers and
# get_layer return the objects the model was built from, and wrap layers the engine made (load_model).
_wrappers = weakref.WeakValueDictionary()


def _wrap(engine_layer):
    """The Python layer of an engine layer (``_nimbus.Layer``), made on first sight."""
    layer = _wrappers.get(engine_layer._key)  # pylint: disable=protected-access
    if layer is None:
        cls = _LAYER_CLASSES.get(engine_layer.class_name, Layer)
        layer = cls.__new__(cls)
        layer._adopt(engine_layer)  # pylint: disable=protected-access
    return layer


def _is_symbolic(inputs):
    first = inputs[0] if isinstance(inputs, (list, tuple)) and inputs else inputs
    return isinstance(first, _nimbus.KerasTensor)


def _policy_name(dtype, owner):
    """A layer's ``dtype=`` (a policy, a policy name or float32) as a policy name."""
    if isinstance(dtype, Policy):
        return dtype.name
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name in ("float32", "mixed_float16", "mixed_bfloat16"):
        return name
    raise ValueError(f"{owner}: dtype={dtype!r} is not supported; Nimbus's layers take the policies "
                     "'float32', 'mixed_float16' and 'mixed_bfloat16' (variables are float32)")


def _refuse_unless_default(owner, kwargs, defaults):
    """Pops Keras arguments Nimbus has only at their defaults; a ValueError for any other value."""
    for argument, default in defaults.items():
        value = kwargs.pop(argument, default)
        if value is not default and value != default:
            raise ValueError(f"{owner}: {argument}={value!r} is not supported: Nimbus's layer has only "
                             f"{argument}={default!r}")


def _size_pair(value, owner, argument):
    """A kernel, stride or pool size: an int or two ints."""
    if isinstance(value, (int, np.integer)):
        return [int(value), int(value)]
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, np.integer)) for v in value):
        return [int(v) for v in value]
    raise ValueError(f"{owner}: {argument}={value!r}: give an int or a tuple of two ints")


def _check_channels_last(data_format, owner):
    if data_format not in (None, "channels_last"):
        raise ValueError(f"{owner}: data_format={data_format!r} is not supported: Nimbus's layers are "
                         "channels_last (NHWC); transpose the data")


def _padding(value, owner):
    padding = str(value).lower()
    if padding not in ("valid", "same"):
        raise ValueError(f"{owner}: padding={value!r}: Nimbus's layers take 'valid' or 'same'")
    return padding


class Layer:
    """A layer of the engine: called on tensors it runs (eagerly, or traced); on ``keras.Input``
    results it adds a node to a functional model's graph.

    Only the engine's layers exist: subclassing ``Layer`` for a layer of one's own is not supported.
    """

    _engine_class = None  # the engine's class name ("Dense"), set by each subclass

    def __init__(self, *args, **kwargs):  # pylint: disable=unused-argument
        raise NotImplementedError(
            f"{type(self).__name__}: layers of one's own (subclasses of keras.layers.Layer) are not supported: "
            "Nimbus's layers run in its C++ engine; build the model from the layers in nimbus.keras.layers")

    def _make(self, config, kwargs):
        """Makes the engine layer from ``config`` and the arguments every Keras layer takes."""
        owner = self._owner(kwargs.get("name"))
        name = kwargs.pop("name", None)
        dtype = kwargs.pop("dtype", None)
        trainable = kwargs.pop("trainable", True)
        input_shape = kwargs.pop("input_shape", None)
        batch_input_shape = kwargs.pop("batch_input_shape", None)
        input_dim = kwargs.pop("input_dim", None)
        if kwargs:
            takes = [p for p in inspect.signature(type(self).__init__).parameters if p not in ("self", "kwargs")]
            raise TypeError(f"{owner}: unexpected keyword argument(s) {', '.join(sorted(kwargs))}; it takes "
                            f"{', '.join(takes + ['name', 'dtype', 'trainable', 'input_shape'])}")
        if name is not None:
            config["name"] = name
        if dtype is not None:
            config["dtype_policy"] = _policy_name(dtype, owner)
        config["trainable"] = bool(trainable)
        self._adopt(_nimbus.Layer.from_config(self._engine_class, json.dumps(config)))
        # Keras's input_shape= (or batch_input_shape=, input_dim=) on a Sequential's first layer
        # declares the model's input.
        if batch_input_shape is not None:
            input_shape = tuple(batch_input_shape)[1:]
        elif input_dim is not None:
            input_shape = (input_dim,)
        self._input_shape = None if input_shape is None else tuple(input_shape)

    def _adopt(self, engine_layer):
        self._layer = engine_layer
        self._input_shape = None
        self._outputs = []  # the symbolic tensors this layer produced, for .output
        _wrappers[engine_layer._key] = self  # pylint: disable=protected-access

    def _owner(self, name=None):
        """How errors name this layer: its class, and its name when known."""
        name = name if name is not None else getattr(getattr(self, "_layer", None), "name", None)
        return f"{type(self).__name__} '{name}'" if name else type(self).__name__

    @classmethod
    def from_config(cls, config):
        if cls._engine_class is None:
            raise NotImplementedError("Layer.from_config: call it on a layer class, such as Dense.from_config")
        layer = cls.__new__(cls)
        layer._adopt(_nimbus.Layer.from_config(cls._engine_class, json.dumps(config)))
        return layer

    def get_config(self):
        config = json.loads(self._layer.get_config_json())
        config["trainable"] = self.trainable
        config["dtype_policy"] = self.dtype_policy.name
        return config

    @property
    def name(self):
        return self._layer.name

    @property
    def built(self):
        return self._layer.built

    @property
    def trainable(self):
        return self._layer.trainable

    @trainable.setter
    def trainable(self, value):
        self._layer.trainable = bool(value)

    @property
    def weights(self):
        return self._layer.weights

    variables = weights

    @property
    def trainable_weights(self):
        return self._layer.trainable_weights

    trainable_variables = trainable_weights

    @property
    def non_trainable_weights(self):
        return self._layer.non_trainable_weights

    non_trainable_variables = non_trainable_weights

    @property
    def dtype_policy(self):
        return Policy(self._layer.dtype_policy.name)

    @property
    def compute_dtype(self):
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self):
        return self.dtype_policy.variable_dtype

    dtype = variable_dtype  # Keras's layer.dtype is its variables' dtype

    def count_params(self):
        return self._layer.count_params()

    def get_weights(self):
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights):
        _assign_weights(self.weights, weights, f"layer '{self.name}'")

    @property
    def output(self):
        """The symbolic output of this layer's one call on ``keras.Input`` results."""
        if len(self._outputs) != 1:
            raise AttributeError(f"layer '{self.name}' has " + ("never been called on a keras.Input result"
                                 if not self._outputs else f"been called {len(self._outputs)} times: no single output"))
        return self._outputs[0]

    @property
    def input(self):
        inputs = self.output._inputs  # pylint: disable=protected-access
        return inputs[0] if len(inputs) == 1 else inputs

    def __call__(self, inputs, training=None):
        return self._call_engine(inputs, training)

    def _call_engine(self, inputs, training):
        if _is_symbolic(inputs):
            output = self._layer.call_symbolic(list(inputs) if isinstance(inputs, (list, tuple)) else [inputs])
            self._outputs.append(output)
            return output
        outputs = self._layer.call(inputs, bool(training))
        # Layers have one output, also when they take several inputs (Add, MultiHeadAttention).
        return outputs[0] if isinstance(outputs, list) and len(outputs) == 1 else outputs

    def __repr__(self):
        return f"<nimbus.keras.layers.{type(self).__name__} name={self.name}>"


def _assign_weights(variables, arrays, owner):
    """set_weights: one array per variable, of its shape; errors name the owner and the weight."""
    arrays = list(arrays)
    if len(arrays) != len(variables):
        raise ValueError(f"{owner}: set_weights got {len(arrays)} arrays for its {len(variables)} weights "
                         f"({', '.join(v.name for v in variables)})")
    values = [np.asarray(a) for a in arrays]
    for variable, value in zip(variables, values):
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"{owner}: weight '{variable.name}' has shape {tuple(variable.shape)}, "
                             f"set_weights got an array of shape {value.shape}")
    for variable, value in zip(variables, values):
        variable.assign(value)


class InputLayer(Layer):
    """The layer behind ``keras.Input``; a Sequential can start with it."""

    _engine_class = "InputLayer"

    def __init__(self, input_shape=None, batch_size=None, dtype=None, input_tensor=None, sparse=None, name=None,
                 ragged=None, shape=None, batch_shape=None, **kwargs):
        # pylint: disable=super-init-not-called
        _refuse_unless_default("InputLayer", {"batch_size": batch_size, "input_tensor": input_tensor,
                                              "sparse": sparse, "ragged": ragged, **kwargs},
                               {"batch_size": None, "input_tensor": None, "sparse": None, "ragged": None})
        shape = input_shape if input_shape is not None else shape
        if shape is None and batch_shape is not None:
            shape = tuple(batch_shape)[1:]
        if shape is None:
            raise ValueError("InputLayer: give input_shape (or shape), the sample's dimensions")
        config = {"batch_input_shape": [None, *shape], "dtype": _nimbus.as_dtype(dtype or "float32").name}
        if name is not None:
            config["name"] = name
        self._adopt(_nimbus.Layer.from_config("InputLayer", json.dumps(config)))


def Input(shape=None, batch_size=None, name=None, dtype=None, sparse=None, tensor=None, ragged=None,
          batch_shape=None):  # pylint: disable=invalid-name  (Keras's name)
    """A symbolic input of a functional model; ``shape`` excludes the batch dimension."""
    _refuse_unless_default("Input", {"batch_size": batch_size, "sparse": sparse, "tensor": tensor, "ragged": ragged},
                           {"batch_size": None, "sparse": None, "tensor": None, "ragged": None})
    if shape is None and batch_shape is not None:
        shape = tuple(batch_shape)[1:]
    if shape is None:
        raise ValueError("Input: give shape, the sample's dimensions without the batch")
    shape = [-1 if d is None else int(d) for d in shape]
    return _nimbus.Input(shape, None if dtype is None else _nimbus.as_dtype(dtype), name or "")


class Dense(Layer):
    _engine_class = "Dense"

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _refuse_unless_default(owner, kwargs, {"bias_regularizer": None, "activity_regularizer": None,
                                               "kernel_constraint": None, "bias_constraint": None})
        self._make({"units": int(units),
                    "activation": _activation_name(activation, owner),
                    "use_bias": bool(use_bias),
                    "kernel_initializer": initializers._config_json(kernel_initializer, owner, "kernel_initializer"),
                    "bias_initializer": initializers._config_json(bias_initializer, owner, "bias_initializer"),
                    "kernel_regularizer": regularizers._config_json(kernel_regularizer, owner,
                                                                    "kernel_regularizer")}, kwargs)


class Conv2D(Layer):
    _engine_class = "Conv2D"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 groups=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _check_channels_last(data_format, owner)
        _refuse_unless_default(owner, {"groups": groups}, {"groups": 1})
        _refuse_unless_default(owner, kwargs, {"bias_regularizer": None, "activity_regularizer": None,
                                               "kernel_constraint": None, "bias_constraint": None})
        self._make({"filters": int(filters),
                    "kernel_size": _size_pair(kernel_size, owner, "kernel_size"),
                    "strides": _size_pair(strides, owner, "strides"),
                    "padding": _padding(padding, owner),
                    "dilation_rate": _size_pair(dilation_rate, owner, "dilation_rate"),
                    "activation": _activation_name(activation, owner),
                    "use_bias": bool(use_bias),
                    "kernel_initializer": initializers._config_json(kernel_initializer, owner, "kernel_initializer"),
                    "bias_initializer": initializers._config_json(bias_initializer, owner, "bias_initializer"),
                    "kernel_regularizer": regularizers._config_json(kernel_regularizer, owner,
                                                                    "kernel_regularizer")}, kwargs)


class DepthwiseConv2D(Layer):
    _engine_class = "DepthwiseConv2D"

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _check_channels_last(data_format, owner)
        _refuse_unless_default(owner, kwargs, {"bias_regularizer": None, "activity_regularizer": None,
                                               "depthwise_constraint": None, "bias_constraint": None})
        self._make({"kernel_size": _size_pair(kernel_size, owner, "kernel_size"),
                    "strides": _size_pair(strides, owner, "strides"),
                    "padding": _padding(padding, owner),
                    "depth_multiplier": int(depth_multiplier),
                    "dilation_rate": _size_pair(dilation_rate, owner, "dilation_rate"),
                    "activation": _activation_name(activation, owner),
                    "use_bias": bool(use_bias),
                    "depthwise_initializer": initializers._config_json(depthwise_initializer, owner,
                                                                       "depthwise_initializer"),
                    "bias_initializer": initializers._config_json(bias_initializer, owner, "bias_initializer"),
                    "depthwise_regularizer": regularizers._config_json(depthwise_regularizer, owner,
                                                                       "depthwise_regularizer")}, kwargs)


class _Pooling2D(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _check_channels_last(data_format, owner)
        self._make({"pool_size": _size_pair(pool_size, owner, "pool_size"),
                    "strides": None if strides is None else _size_pair(strides, owner, "strides"),
                    "padding": _padding(padding, owner)}, kwargs)


class MaxPooling2D(_Pooling2D):
    _engine_class = "MaxPooling2D"


class AveragePooling2D(_Pooling2D):
    _engine_class = "AveragePooling2D"


class _GlobalAveragePooling(Layer):
    def __init__(self, data_format=None, keepdims=False, **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _check_channels_last(data_format, owner)
        _refuse_unless_default(owner, {"keepdims": keepdims}, {"keepdims": False})
        self._make({}, kwargs)


class GlobalAveragePooling1D(_GlobalAveragePooling):
    _engine_class = "GlobalAveragePooling1D"


class GlobalAveragePooling2D(_GlobalAveragePooling):
    _engine_class = "GlobalAveragePooling2D"


class Flatten(Layer):
    _engine_class = "Flatten"

    def __init__(self, data_format=None, **kwargs):
        # pylint: disable=super-init-not-called
        _check_channels_last(data_format, self._owner(kwargs.get("name")))
        self._make({}, kwargs)


class Reshape(Layer):
    _engine_class = "Reshape"

    def __init__(self, target_shape, **kwargs):
        # pylint: disable=super-init-not-called
        self._make({"target_shape": [int(d) for d in target_shape]}, kwargs)


class Activation(Layer):
    _engine_class = "Activation"

    def __init__(self, activation, **kwargs):
        # pylint: disable=super-init-not-called
        self._make({"activation": _activation_name(activation, self._owner(kwargs.get("name")))}, kwargs)


class Add(Layer):
    _engine_class = "Add"

    def __init__(self, **kwargs):
        # pylint: disable=super-init-not-called
        self._make({}, kwargs)


class Concatenate(Layer):
    _engine_class = "Concatenate"

    def __init__(self, axis=-1, **kwargs):
        # pylint: disable=super-init-not-called
        self._make({"axis": int(axis)}, kwargs)


class Dropout(Layer):
    """Zeroes inputs with probability ``rate`` in training (scaling the rest); identity otherwise."""

    _engine_class = "Dropout"

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        # pylint: disable=super-init-not-called
        _refuse_unless_default(self._owner(kwargs.get("name")), {"noise_shape": noise_shape}, {"noise_shape": None})
        self._make({"rate": float(rate), "seed": seed}, kwargs)


class BatchNormalization(Layer):
    _engine_class = "BatchNormalization"

    def __init__(self, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True, **kwargs):
        # pylint: disable=super-init-not-called
        _refuse_unless_default(self._owner(kwargs.get("name")), kwargs, {
            "beta_initializer": "zeros", "gamma_initializer": "ones", "moving_mean_initializer": "zeros",
            "moving_variance_initializer": "ones", "beta_regularizer": None, "gamma_regularizer": None,
            "beta_constraint": None, "gamma_constraint": None, "synchronized": False})
        self._make({"axis": axis, "momentum": float(momentum), "epsilon": float(epsilon), "center": bool(center),
                    "scale": bool(scale)}, kwargs)


class LayerNormalization(Layer):
    _engine_class = "LayerNormalization"

    def __init__(self, axis=-1, epsilon=0.001, center=True, scale=True, **kwargs):
        # pylint: disable=super-init-not-called
        kwargs.update(center=center, scale=scale)
        _refuse_unless_default(self._owner(kwargs.get("name")), kwargs, {
            "center": True, "scale": True, "beta_initializer": "zeros", "gamma_initializer": "ones",
            "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None, "gamma_constraint": None})
        self._make({"axis": axis, "epsilon": float(epsilon)}, kwargs)


class Embedding(Layer):
    """Integer ids (N, ...) to vectors (N, ..., output_dim)."""

    _engine_class = "Embedding"

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", embeddings_regularizer=None,
                 activity_regularizer=None, embeddings_constraint=None, mask_zero=False, input_length=None, **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _refuse_unless_default(owner, {"embeddings_regularizer": embeddings_regularizer,
                                       "activity_regularizer": activity_regularizer,
                                       "embeddings_constraint": embeddings_constraint, "mask_zero": mask_zero,
                                       "sparse": kwargs.pop("sparse", False)},
                               {"embeddings_regularizer": None, "activity_regularizer": None,
                                "embeddings_constraint": None, "mask_zero": False, "sparse": False})
        if input_length is not None and "input_shape" not in kwargs:
            kwargs["input_shape"] = (input_length,)
        self._make({"input_dim": int(input_dim), "output_dim": int(output_dim),
                    "embeddings_initializer": initializers._config_json(embeddings_initializer, owner,
                                                                        "embeddings_initializer")}, kwargs)


class PositionEmbedding(Layer):
    """KerasHub's (keras_nlp's) PositionEmbedding: a learned (sequence_length, features) table whose
    first T rows, broadcast to the input's shape (N, T, features), are the output."""

    _engine_class = "PositionEmbedding"

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        self._make({"sequence_length": int(sequence_length),
                    "initializer": initializers._config_json(initializer, owner, "initializer")}, kwargs)


class MultiHeadAttention(Layer):
    """Keras's MultiHeadAttention: ``mha(query, value, key=None, attention_mask=None)``."""

    _engine_class = "MultiHeadAttention"

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, kernel_initializer="glorot_uniform", bias_initializer="zeros", seed=None,
                 **kwargs):
        # pylint: disable=super-init-not-called
        owner = self._owner(kwargs.get("name"))
        _refuse_unless_default(owner, kwargs, {"kernel_regularizer": None, "bias_regularizer": None,
                                               "activity_regularizer": None, "kernel_constraint": None,
                                               "bias_constraint": None})
        if isinstance(output_shape, (list, tuple)):
            if len(output_shape) != 1:
                raise ValueError(f"{owner}: output_shape={output_shape!r}: Nimbus's MultiHeadAttention projects "
                                 "to one axis; give an int")
            output_shape = output_shape[0]
        if attention_axes not in (None, 1, -2, (1,), [1], (-2,), [-2]):
            raise ValueError(f"{owner}: attention_axes={attention_axes!r}: Nimbus attends over the sequence "
                             "axis (1) only")
        self._make({"num_heads": int(num_heads), "key_dim": int(key_dim), "value_dim": value_dim,
                    "dropout": float(dropout), "use_bias": bool(use_bias), "output_shape": output_shape,
                    "kernel_initializer": initializers._config_json(kernel_initializer, owner, "kernel_initializer"),
                    "bias_initializer": initializers._config_json(bias_initializer, owner, "bias_initializer"),
                    "seed": seed}, kwargs)

    def __call__(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,  # pylint: disable=arguments-differ
                 attention_mask=None, return_attention_scores=False, training=None, use_causal_mask=False):
        _refuse_unless_default(self._owner(), {
            "query_mask": query_mask, "value_mask": value_mask, "key_mask": key_mask,
            "return_attention_scores": return_attention_scores, "use_causal_mask": use_causal_mask}, {
                "query_mask": None, "value_mask": None, "key_mask": None, "return_attention_scores": False,
                "use_causal_mask": False})
        inputs = [query, value]
        if key is not None or attention_mask is not None:
            inputs.append(value if key is None else key)  # Keras: the key defaults to the value
        if attention_mask is not None:
            inputs.append(attention_mask)
        return self._call_engine(inputs, training)


class Normalization(Layer):
    """(x - mean) / sqrt(variance) per index of ``axis``; give mean and variance, or call ``adapt(data)``."""

    _engine_class = "Normalization"

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        # pylint: disable=super-init-not-called
        def values(value):
            return None if value is None else np.asarray(value, np.float64).tolist()

        self._make({"axis": axis if axis is None or isinstance(axis, int) else list(axis), "mean": values(mean),
                    "variance": values(variance), "invert": bool(invert)}, kwargs)

    def adapt(self, data, batch_size=None, steps=None):
        """Sets mean and variance from ``data`` (samples on the first axis), building the layer if needed."""
        _refuse_unless_default(self._owner(), {"batch_size": batch_size, "steps": steps},
                               {"batch_size": None, "steps": None})
        if not isinstance(data, (_nimbus.Tensor, _nimbus.Variable)):
            data = np.asarray(data, np.float32)
        self._layer.adapt(data)


class Rescaling(Layer):
    """x * scale + offset; integer inputs (uint8 pixels) become float32 first."""

    _engine_class = "Rescaling"

    def __init__(self, scale, offset=0.0, **kwargs):
        # pylint: disable=super-init-not-called
        self._make({"scale": float(scale), "offset": float(offset)}, kwargs)


# Keras's aliases.
MaxPool2D, AvgPool2D = MaxPooling2D, AveragePooling2D
GlobalAvgPool1D, GlobalAvgPool2D = GlobalAveragePooling1D, GlobalAveragePooling2D

_LAYER_CLASSES = {cls._engine_class: cls for cls in (  # pylint: disable=protected-access
    InputLayer, Dense, Conv2D, DepthwiseConv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling1D,
    GlobalAveragePooling2D, Flatten, Reshape, Activation, Add, Concatenate, Dropout, BatchNormalization,
    LayerNormalization, Embedding, PositionEmbedding, MultiHeadAttention, Normalization, Rescaling)}


def __getattr__(name):
    raise AttributeError(f"nimbus.keras.layers has no {name}: Nimbus's layers are {', '.join(sorted(_LAYER_CLASSES))}"
                         " (and the aliases MaxPool2D, AvgPool2D, GlobalAvgPool1D, GlobalAvgPool2D)")
