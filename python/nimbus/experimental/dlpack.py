"""``nimbus.experimental.dlpack``: TensorFlow's tf.experimental.dlpack (python/src/dlpack.cc).

``to_dlpack(tensor)`` gives a DLPack capsule viewing the tensor's memory; ``from_dlpack(capsule)``
(or any object with ``__dlpack__``: a NumPy array, a torch.Tensor) gives a tensor viewing the
producer's memory. Both are zero-copy for CPU tensors.
"""
from nimbus._nimbus import from_dlpack, to_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
