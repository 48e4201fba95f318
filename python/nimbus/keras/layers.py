"""``nimbus.keras.layers``: the engine's layers under Keras's names and arguments.

Each class maps Keras's constructor arguments (positional forms included) onto
the layer's Keras config, from which the engine makes the layer; the engine
checks the values and names the layer in its errors.
"""
import json

from nimbus import _nimbus


class Layer:
    """A layer of the engine; calling it on tensors runs it, on ``keras.Input`` results builds a model graph."""

    def __init__(self, class_name, config, name=None, input_shape=None, dtype=None, **unsupported):
        if unsupported:
            raise TypeError(f"{class_name}: unexpected keyword argument(s) {sorted(unsupported)}")
        if name is not None:
            config["name"] = name
        if dtype is not None:
            config["dtype"] = dtype
        self._layer = _nimbus.Layer.from_config(class_name, json.dumps(config))
        # Keras's input_shape= on a Sequential's first layer declares the model's input.
        self._input_shape = None if input_shape is None else tuple(input_shape)

    @property
    def name(self):
        return self._layer.name

    @property
    def built(self):
        return self._layer.built

    @property
    def weights(self):
        return self._layer.weights

    @property
    def trainable_weights(self):
        return self._layer.trainable_weights

    @property
    def non_trainable_weights(self):
        return self._layer.non_trainable_weights

    def count_params(self):
        return self._layer.count_params()

    def get_config(self):
        return json.loads(self._layer.get_config_json())

    def __call__(self, inputs, training=False):
        many = isinstance(inputs, (list, tuple))
        first = inputs[0] if many and inputs else inputs
        if isinstance(first, _nimbus.KerasTensor):
            return self._layer.call_symbolic(list(inputs) if many else [inputs])
        return self._layer.call(inputs, training)


class Dense(Layer):
    def __init__(self, units, activation=None, use_bias=True, **kwargs):
        super().__init__("Dense", {"units": units, "activation": activation or "linear", "use_bias": use_bias},
                         **kwargs)


class Flatten(Layer):
    def __init__(self, **kwargs):
        super().__init__("Flatten", {}, **kwargs)
