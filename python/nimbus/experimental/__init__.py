"""``nimbus.experimental``: TensorFlow's tf.experimental namespaces that Nimbus has."""
from nimbus.experimental import dlpack
