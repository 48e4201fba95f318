"""Devices: TensorFlow's device names, and ``nimbus.device``, the scope that places new tensors on a device.

TensorFlow names a device ``/GPU:0``, ``GPU:0``, ``/device:GPU:0``, ``gpu`` or
``/job:localhost/replica:0/task:0/device:GPU:0``; the engine names it
``cuda:0``. Under soft placement (TensorFlow's default) a device this process
does not have means the CPU.
"""
import contextlib
import re

from nimbus import _nimbus, errors

_NAME = re.compile(r"^(?:/job:[^/]+)?(?:/replica:\d+)?(?:/task:\d+)?/?(?:device:|physical_device:)?(CPU|GPU)(?::(\d+))?$",
                   re.IGNORECASE)

# tf.config.set_soft_device_placement; the visible GPUs are config.set_visible_devices'.
_soft_placement = [True]
_hidden_gpus = set()


def parse(name):
    """``(device_type, index)`` of a TensorFlow device name or device object: ``('GPU', 0)`` for ``'/gpu:0'``."""
    text = getattr(name, "name", name)
    match = _NAME.match(str(text).strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"device {name!r} is not a device name: use '/CPU:0', '/GPU:0' or "
                         "'/job:localhost/replica:0/task:0/device:GPU:0'")
    return match.group(1).upper(), int(match.group(2) or 0)


def count(device_type):
    """How many devices of ``'CPU'`` or ``'GPU'`` this process has (the CPU's logical devices)."""
    if device_type == "CPU":
        return _nimbus.logical_cpu_device_count()
    return sum(1 for index in range(_nimbus.gpu_count()) if index not in _hidden_gpus)


def engine_name(device_type, index):
    """The engine's name of a device: ``cpu:0``, ``cuda:1``."""
    return f"{'cpu' if device_type == 'CPU' else 'cuda'}:{index}"


@contextlib.contextmanager
def device(device_name):
    """``with nimbus.device('/GPU:0'):`` tensors made inside (constants, NumPy arrays converted by ops,
    ``zeros``, ``ones``, ``fill``, ``range``, random draws) are made on that device, and ops run where
    their inputs are. A device this process lacks means the CPU (soft placement), unless
    ``config.set_soft_device_placement(False)``, where it raises ``InvalidArgumentError``.
    """
    if device_name is None or device_name == "":
        placement = None
    else:
        device_type, index = parse(device_name)
        if index >= count(device_type):
            if not _soft_placement[0]:
                raise errors.InvalidArgumentError(
                    f"device '{device_name}': this process has {count(device_type)} {device_type} device(s)",
                    "use a device it has, or config.set_soft_device_placement(True) to fall back to the CPU")
            device_type, index = "CPU", 0
        placement = engine_name(device_type, index)
    previous = _nimbus.set_placement(placement)
    try:
        yield
    finally:
        _nimbus.set_placement(previous)
