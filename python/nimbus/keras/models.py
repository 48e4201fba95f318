"""``nimbus.keras.Model``, ``Sequential`` and ``nimbus.keras.models``: models of engine layers.

A Python model holds the engine's model (``_nimbus.Model``); its layers are the
Python objects it was built from, or wrappers made for the layers the engine
made (``load_model``). Training (``compile``, ``fit``, ...) comes from
``TrainingMixin`` (training.py).
"""
import json
import os

from nimbus import _nimbus, distribute, errors
from nimbus.keras.layers import Input, Layer, _assign_weights, _wrap
from nimbus.keras.training import TrainingMixin


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


class Model(TrainingMixin):
    """A functional model, ``Model(inputs, outputs)``, from ``keras.Input`` results to layer outputs."""

    def __init__(self, inputs=None, outputs=None, name=None, trainable=True):
        if inputs is None or outputs is None:
            if type(self) is not Model:
                raise NotImplementedError(
                    f"{type(self).__name__}: subclassed models (a call() method of one's own) are not supported: "
                    "Nimbus runs models as graphs of its C++ layers; build the model with keras.Sequential or "
                    "the functional API, Model(inputs, outputs)")
            raise TypeError("Model: give inputs and outputs, Model(inputs, outputs)")
        if isinstance(inputs, dict) or isinstance(outputs, dict):
            raise TypeError("Model: inputs and outputs as dicts are not supported; pass lists")
        self._adopt(_nimbus.Model(_as_list(inputs), _as_list(outputs), name or ""))
        self._outputs_listed = isinstance(outputs, (list, tuple))
        if not trainable:
            self.trainable = False

    def _adopt(self, engine_model):
        TrainingMixin.__init__(self)
        self.distribute_strategy = distribute._scope_strategy()  # pylint: disable=protected-access
        self._model = engine_model
        # The Python layer of each engine layer (by its _key), held here so that model.layers returns
        # the same objects for as long as the model lives.
        self._layer_objects = {}
        self._outputs_listed = len(engine_model.outputs) > 1
        self._record_layer_outputs()

    def _record_layer_outputs(self):
        """Gives each layer its symbolic outputs in this model's graph (for ``layer.output``)."""
        seen = set()
        stack = list(self._model.outputs)
        while stack:
            tensor = stack.pop()
            if tensor._node in seen:  # pylint: disable=protected-access
                continue
            seen.add(tensor._node)  # pylint: disable=protected-access
            layer = self._layer_object(tensor._layer)  # pylint: disable=protected-access
            if all(t._node != tensor._node for t in layer._outputs):  # pylint: disable=protected-access
                layer._outputs.append(tensor)  # pylint: disable=protected-access
            stack.extend(tensor._inputs)  # pylint: disable=protected-access

    def _layer_object(self, engine_layer):
        key = engine_layer._key  # pylint: disable=protected-access
        if key not in self._layer_objects:
            self._layer_objects[key] = _wrap(engine_layer)
        return self._layer_objects[key]

    def __call__(self, inputs, training=None):
        if any(isinstance(x, _nimbus.KerasTensor) for x in _as_list(inputs)):
            raise NotImplementedError(f"model '{self.name}': using a model as a layer of another model is not "
                                      "supported; build one model from the layers")
        was_built = self._model.built
        outputs = self._model.call(inputs, bool(training))
        if not was_built:
            self._record_layer_outputs()
        if isinstance(outputs, list) and len(outputs) == 1 and not self._outputs_listed:
            return outputs[0]
        if not isinstance(outputs, list) and self._outputs_listed:
            return [outputs]
        return outputs

    @property
    def name(self):
        return self._model.name

    @property
    def built(self):
        return self._model.built

    @property
    def layers(self):
        """The layers in the order they run (InputLayers first for functional models, none for Sequential)."""
        return [self._layer_object(layer) for layer in self._model.layers]

    def get_layer(self, name=None, index=None):
        """A layer by index (which takes precedence, as in Keras) or by name."""
        layers = self.layers
        if index is not None:
            if not -len(layers) <= index < len(layers):
                raise ValueError(f"model '{self.name}': no layer at index {index}; it has {len(layers)} layers")
            return layers[index]
        if name is None:
            raise ValueError("get_layer: give a name or an index")
        try:
            return self._layer_object(self._model.get_layer(name))
        except errors.NotFoundError as error:
            raise ValueError(error.message) from None

    @property
    def inputs(self):
        return self._model.inputs

    @property
    def outputs(self):
        return self._model.outputs

    @property
    def input(self):
        inputs = self.inputs
        return inputs[0] if len(inputs) == 1 else inputs

    @property
    def output(self):
        outputs = self.outputs
        return outputs[0] if len(outputs) == 1 and not self._outputs_listed else outputs

    @property
    def input_shape(self):
        shapes = [t.shape for t in self.inputs]
        return shapes[0] if len(shapes) == 1 else shapes

    @property
    def output_shape(self):
        shapes = [t.shape for t in self.outputs]
        return shapes[0] if len(shapes) == 1 and not self._outputs_listed else shapes

    @property
    def trainable(self):
        return all(layer.trainable for layer in self.layers)

    @trainable.setter
    def trainable(self, value):
        for layer in self.layers:
            layer.trainable = value

    @property
    def weights(self):
        return self._model.weights

    variables = weights

    @property
    def trainable_variables(self):
        return self._model.trainable_weights

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self):
        return self._model.non_trainable_weights

    non_trainable_weights = non_trainable_variables

    def count_params(self):
        if not self.built:
            raise ValueError(f"model '{self.name}' is not built: call it on data or build(input_shape) first")
        return self._model.count_params()

    def get_weights(self):
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights):
        _assign_weights(self.weights, weights, f"model '{self.name}'")

    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False, show_trainable=False,
                layer_range=None):
        """Keras's table, one line per ``print_fn`` call (print by default)."""
        del expand_nested  # models hold no nested models
        for argument, value in (("line_length", line_length), ("positions", positions),
                                ("show_trainable", show_trainable), ("layer_range", layer_range)):
            if value:
                raise ValueError(f"summary: {argument}={value!r} is not supported; Nimbus prints Keras's "
                                 "default table")
        for line in self._model.summary_string().rstrip("\n").split("\n"):
            (print_fn or print)(line)

    def get_config(self):
        return json.loads(self._model.to_config_json())["config"]

    @classmethod
    def from_config(cls, config, custom_objects=None):  # pylint: disable=unused-argument
        class_name = "Functional" if "input_layers" in config else "Sequential"
        return _model_of(_nimbus.model_from_config_json(json.dumps({"class_name": class_name, "config": config})))

    def to_json(self, **kwargs):
        """Keras's architecture JSON; ``keras.models.model_from_json`` reads it back (without weights)."""
        return json.dumps(json.loads(self._model.to_config_json()), **kwargs)

    def save(self, filepath, overwrite=True, save_format=None, include_optimizer=True):  # pylint: disable=unused-argument
        """Writes the architecture and the weights to one safetensors file at exactly ``filepath``.

        Whatever the extension ('.keras', '.h5', none) or ``save_format``, the file is Nimbus's
        safetensors; ``keras.models.load_model`` reads it. The optimizer's state is not saved.
        """
        path = os.fspath(filepath)
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"{path} exists and overwrite=False")
        self._model.save(path)

    def save_weights(self, filepath, overwrite=True, save_format=None, options=None):  # pylint: disable=unused-argument
        """Writes the weights, in ``model.weights`` order, to a safetensors file at ``filepath``."""
        path = os.fspath(filepath)
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"{path} exists and overwrite=False")
        weights = self.weights
        _nimbus.write_safetensors(path, [(v.name, v.value()) for v in weights],
                                  {"format": "nimbus", "nimbus.weight_order": json.dumps([v.name for v in weights])})

    def load_weights(self, filepath, skip_mismatch=False, by_name=False, options=None):  # pylint: disable=unused-argument
        """Reads weights written by ``save_weights`` (matched by position, as Keras does) or by ``save``
        (matched by weight name); shapes must agree."""
        if skip_mismatch:
            raise ValueError("load_weights: skip_mismatch=True is not supported; every weight must match")
        path = os.fspath(filepath)
        tensors, metadata = _nimbus.read_safetensors(path)
        weights = self.weights
        if "nimbus.weight_order" in metadata and not by_name:
            arrays = [tensors[name] for name in json.loads(metadata["nimbus.weight_order"])]
        else:
            missing = [v.name for v in weights if v.name not in tensors]
            if missing:
                raise ValueError(f"load_weights: {path} has no weight(s) {', '.join(missing)} "
                                 f"(it has {', '.join(sorted(tensors))})")
            arrays = [tensors[v.name] for v in weights]
        _assign_weights(weights, arrays, f"model '{self.name}' loading {path}")


class Sequential(Model):
    """A stack of layers: ``Sequential([Flatten(input_shape=(28, 28)), Dense(10)])`` or ``add()``.

    Without an input shape (an ``input_shape=`` on the first layer, an ``Input`` or ``InputLayer``
    first, or ``build(input_shape)``) it builds when it first sees data.
    """

    def __init__(self, layers=None, name=None, trainable=True):  # pylint: disable=super-init-not-called
        self._adopt(_nimbus.Sequential([], name or ""))
        for layer in layers or []:
            self.add(layer)
        if not trainable:
            self.trainable = False

    def add(self, layer):
        if isinstance(layer, _nimbus.KerasTensor):
            self._model.add_input(layer)
            return
        if isinstance(layer, Model):
            raise NotImplementedError(f"Sequential '{self.name}': a model as a layer is not supported; "
                                      "add its layers")
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential '{self.name}': add() takes a keras layer, got {type(layer).__name__}")
        if layer._input_shape is not None and not self.built and not self._model.layers:  # pylint: disable=protected-access
            self._model.add_input(Input(layer._input_shape))  # pylint: disable=protected-access
        self._model.add(layer._layer)  # pylint: disable=protected-access
        self._layer_objects[layer._layer._key] = layer  # pylint: disable=protected-access
        self._record_layer_outputs()

    def build(self, input_shape=None):
        """Builds every layer for inputs of ``input_shape`` (batch dimension first, as in Keras)."""
        if input_shape is None:
            if self.built:
                return
            raise ValueError(f"Sequential '{self.name}': build() needs an input_shape")
        self._model.build([-1 if d is None else int(d) for d in list(input_shape)[1:]])
        self._record_layer_outputs()


def _model_of(engine_model):
    """The Python model of an engine model: a Sequential for a Sequential's config, else a Model."""
    if json.loads(engine_model.to_config_json())["class_name"] != "Sequential":
        model = Model.__new__(Model)
        model._adopt(engine_model)  # pylint: disable=protected-access
        return model
    # The engine hands back its Sequential as a Model; the same layers are stacked again, so that
    # add() works on it.
    stack = _nimbus.Sequential([], engine_model.name)
    if engine_model.inputs:
        stack.add_input(engine_model.inputs[0])
    for layer in engine_model.layers:
        stack.add(layer)
    model = Sequential.__new__(Sequential)
    model._adopt(stack)  # pylint: disable=protected-access
    return model


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):  # pylint: disable=redefined-builtin,unused-argument
    """The model ``model.save`` wrote, with its weights (uncompiled: the file holds no training setup)."""
    return _model_of(_nimbus.load_model(os.fspath(filepath)))


def save_model(model, filepath, overwrite=True, save_format=None, include_optimizer=True):
    model.save(filepath, overwrite=overwrite, save_format=save_format, include_optimizer=include_optimizer)


def model_from_json(json_string, custom_objects=None):  # pylint: disable=unused-argument
    """A model from ``to_json()`` (or Keras's own, for the layers Nimbus has), with fresh weights."""
    return _model_of(_nimbus.model_from_config_json(json_string))


def model_from_config(config, custom_objects=None):  # pylint: disable=unused-argument
    """A model from ``{"class_name": ..., "config": ...}``, as ``json.loads(model.to_json())``."""
    return _model_of(_nimbus.model_from_config_json(json.dumps(config)))
