"""``nimbus.keras``: Keras's models, layers and training under Keras's names (``tf.keras``)."""
from nimbus.keras import layers, models
from nimbus.keras import callbacks, losses, metrics, optimizers
from nimbus.keras.models import Input, Model, Sequential
