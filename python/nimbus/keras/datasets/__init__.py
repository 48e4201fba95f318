"""``nimbus.keras.datasets``: Keras's datasets read from Debian's packages (nothing is downloaded)."""
from nimbus.keras.datasets import fashion_mnist
