"""``nimbus.keras``: Keras's models, layers and training under Keras's names (``tf.keras``)."""
from nimbus.keras import activations, datasets, initializers, layers, mixed_precision, models, regularizers
from nimbus.keras.layers import Input
from nimbus.keras.models import Model, Sequential
