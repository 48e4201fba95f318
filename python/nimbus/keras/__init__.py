"""``nimbus.keras``: Keras's models, layers and training under Keras's names (``tf.keras``)."""
from nimbus.keras import (activations, callbacks, datasets, initializers, layers, losses, metrics, mixed_precision,
                          models, optimizers, regularizers)
from nimbus.keras.layers import Input
from nimbus.keras.models import Model, Sequential
