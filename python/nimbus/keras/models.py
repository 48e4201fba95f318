"""``nimbus.keras.Model``, ``Sequential`` and ``Input``: models of engine layers."""
from nimbus import _nimbus
from nimbus.keras.training import TrainingMixin
from nimbus.tensor_shape import TensorShape

_nimbus.KerasTensor.shape = property(lambda self: TensorShape(self._shape), doc="Dimensions; None for the batch.")


def Input(shape, dtype=None, name=None):  # pylint: disable=invalid-name  (Keras's name)
    """A symbolic input of a functional model; ``shape`` excludes the batch dimension."""
    return _nimbus.Input(list(shape), dtype, name or "")


class Model(TrainingMixin):
    """A functional model, ``Model(inputs, outputs)``."""

    def __init__(self, inputs, outputs, name=None):
        def as_list(value):
            return list(value) if isinstance(value, (list, tuple)) else [value]

        self._model = _nimbus.Model(as_list(inputs), as_list(outputs), name or "")

    def __call__(self, inputs, training=False):
        return self._model.call(inputs, training)

    @property
    def name(self):
        return self._model.name

    @property
    def weights(self):
        return self._model.weights

    @property
    def trainable_variables(self):
        return self._model.trainable_weights

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self):
        return self._model.non_trainable_weights

    non_trainable_weights = non_trainable_variables

    def count_params(self):
        return self._model.count_params()

    def summary(self, print_fn=print):
        print_fn(self._model.summary_string().rstrip("\n"))


class Sequential(Model):
    """A stack of layers, ``Sequential([Flatten(input_shape=(28, 28)), Dense(10)])``."""

    def __init__(self, layers=None, name=None):  # pylint: disable=super-init-not-called
        self._model = _nimbus.Sequential([], name or "")
        self._has_input = False
        for layer in layers or []:
            self.add(layer)

    def add(self, layer):
        if isinstance(layer, _nimbus.KerasTensor):
            self._model.add_input(layer)
            self._has_input = True
            return
        if layer._input_shape is not None and not self._has_input:  # pylint: disable=protected-access
            self._model.add_input(Input(layer._input_shape))  # pylint: disable=protected-access
            self._has_input = True
        self._model.add(layer._layer)  # pylint: disable=protected-access

    def build(self, input_shape):
        """Builds every layer for inputs of ``input_shape`` (batch dimension first, as in Keras)."""
        self._model.build(list(input_shape)[1:])
