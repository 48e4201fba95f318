"""``nimbus.config``: the runtime's process-wide switches under TensorFlow's names (``tf.config``)."""
import collections
import types

from nimbus import _nimbus, errors
from nimbus import devices as device_module


def run_functions_eagerly(run_eagerly):
    """With True, ``nimbus.function``s (and Keras's training steps) run their Python eagerly, untraced."""
    _nimbus.set_graph_mode(not run_eagerly)


def functions_run_eagerly():
    """Whether ``run_functions_eagerly(True)`` is in effect."""
    return not _nimbus.graph_mode()


def _set_jit(enabled):
    """Fusion of elementwise ops for functions traced from now on without ``jit_compile``.

    True or "autoclustering" turns it on, False or "" off (TensorFlow's values); it is on by default.
    """
    if enabled not in (True, False, "autoclustering", ""):
        raise ValueError(f"set_jit: {enabled!r} is not True, False, 'autoclustering' or ''")
    _nimbus.set_jit(bool(enabled))


def _get_jit():
    """'autoclustering' when fusion is on, '' when off (TensorFlow's values)."""
    return "autoclustering" if _nimbus.jit() else ""


optimizer = types.SimpleNamespace(set_jit=_set_jit, get_jit=_get_jit)


# Devices and memory (tf.config's device functions). A device is a PhysicalDevice (a machine's CPU or GPU)
# or a LogicalDevice (what the runtime uses: the CPU may be split into several, docs/python.md, "Config").
PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


class LogicalDeviceConfiguration(
        collections.namedtuple("LogicalDeviceConfiguration",
                               ["memory_limit", "experimental_priority", "experimental_device_ordinal"])):
    """One logical device of a physical one: ``memory_limit`` in MB (required on a GPU)."""

    def __new__(cls, memory_limit=None, experimental_priority=None, experimental_device_ordinal=None):
        return super().__new__(cls, memory_limit, experimental_priority, experimental_device_ordinal)


_memory_growth = {}  # GPU PhysicalDevice -> bool, once set
_logical_configurations = {}  # PhysicalDevice -> [LogicalDeviceConfiguration]
_initialized = [False]  # list_logical_devices and strategies initialize the runtime, as in TensorFlow


def _runtime_initialized():
    """TensorFlow's runtime starts at the first op, list_logical_devices or strategy; so does this check."""
    return _initialized[0] or _nimbus.tensors_allocated()


def _mark_initialized():
    _initialized[0] = True


def _physical_devices():
    gpus = [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(_nimbus.gpu_count())]
    return [PhysicalDevice("/physical_device:CPU:0", "CPU")] + gpus


def _recognized(device):
    if device not in _physical_devices():
        raise ValueError(f"Unrecognized device: {device!r}")


def _engine_name(device):
    """The engine's name (``cuda:0``) of a TF device name or device object."""
    return device_module.engine_name(*device_module.parse(device))


def list_physical_devices(device_type=None):
    """The machine's devices, ``'CPU'`` or ``'GPU'`` ones or all: ``[PhysicalDevice('/physical_device:GPU:0', 'GPU')]``."""
    return [d for d in _physical_devices() if device_type is None or d.device_type == device_type.upper()]


def list_logical_devices(device_type=None):
    """The devices the runtime uses: the CPU's logical devices and the visible GPUs. Initializes the runtime."""
    _mark_initialized()
    devices = [LogicalDevice(f"/device:CPU:{i}", "CPU") for i in range(device_module.count("CPU"))]
    devices += [LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(device_module.count("GPU"))]
    return [d for d in devices if device_type is None or d.device_type == device_type.upper()]


def get_visible_devices(device_type=None):
    """The physical devices the runtime may use (all of them unless ``set_visible_devices`` hid some)."""
    return [d for d in list_physical_devices(device_type)
            if d.device_type == "CPU" or int(d.name.rsplit(":", 1)[1]) not in device_module._hidden_gpus]  # pylint: disable=protected-access


def set_visible_devices(devices, device_type=None):
    """Hides the GPUs not listed (``set_visible_devices([], 'GPU')`` hides them all); the CPU stays visible."""
    devices = [devices] if isinstance(devices, PhysicalDevice) else list(devices)
    for device in devices:
        _recognized(device)
    if device_type in (None, "CPU") and not any(d.device_type == "CPU" for d in devices):
        raise ValueError("CPU must be visible: list it, or give device_type='GPU'")
    visible = {int(d.name.rsplit(":", 1)[1]) for d in devices if d.device_type == "GPU"}
    hidden = {i for i in range(_nimbus.gpu_count()) if i not in visible}
    if hidden == device_module._hidden_gpus:  # pylint: disable=protected-access
        return
    if _runtime_initialized():
        raise RuntimeError("Visible devices cannot be modified after being initialized")
    device_module._hidden_gpus.clear()  # pylint: disable=protected-access
    device_module._hidden_gpus.update(hidden)  # pylint: disable=protected-access


def _set_memory_growth(device, enable):
    """On a GPU: True takes memory as tensors need it, False reserves most of the GPU at once.

    Raises ValueError on a CPU device, as TensorFlow does.
    """
    _recognized(device)
    if device in _logical_configurations:
        raise ValueError("Cannot set memory growth on device when virtual devices configured")
    if device.device_type != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    if _memory_growth.get(device) == enable:
        return
    if _runtime_initialized():
        raise RuntimeError("Physical devices cannot be modified after being initialized")
    _nimbus.set_memory_growth(_engine_name(device), bool(enable))
    _memory_growth[device] = bool(enable)


def _get_memory_growth(device):
    """What ``set_memory_growth`` set on this GPU; None before."""
    _recognized(device)
    if device.device_type != "GPU":
        raise ValueError(f"{device.name} is not a GPU: memory growth is a GPU setting")
    return _memory_growth.get(device)


def set_logical_device_configuration(device, logical_devices):
    """Splits a physical device into logical ones, as TensorFlow does.

    The CPU: one logical device per configuration (``/device:CPU:0`` ...), sharing the cores evenly,
    for ``MirroredStrategy``; memory limits given cap the host's memory at their sum. A GPU: one
    configuration, whose ``memory_limit`` (MB) caps what its allocator reserves.
    """
    _recognized(device)
    logical_devices = list(logical_devices)
    for config in logical_devices:
        if config.experimental_priority is not None or config.experimental_device_ordinal is not None:
            raise ValueError("experimental_priority and experimental_device_ordinal are not supported")
    if not logical_devices:
        raise ValueError("set_logical_device_configuration: give at least one LogicalDeviceConfiguration")
    limits = [config.memory_limit for config in logical_devices]
    if device.device_type == "GPU":
        if any(limit is None for limit in limits):
            raise ValueError("Setting memory limit is required for GPU virtual devices")
        if len(logical_devices) > 1:
            raise errors.UnimplementedError(f"{len(logical_devices)} logical devices on {device.name}",
                                            "give a GPU one LogicalDeviceConfiguration: its memory limit")
    elif any(limit is None for limit in limits) and any(limit is not None for limit in limits):
        raise ValueError("give every CPU LogicalDeviceConfiguration a memory_limit, or none")
    if _logical_configurations.get(device) == logical_devices:
        return
    if _runtime_initialized():
        raise RuntimeError("Virtual devices cannot be modified after being initialized")
    if device.device_type == "CPU":
        _nimbus.set_logical_cpu_devices(len(logical_devices))
    if all(limit is not None for limit in limits):
        _nimbus.set_memory_limit(_engine_name(device), int(sum(limits) * 2**20))
    _logical_configurations[device] = logical_devices


def get_logical_device_configuration(device):
    """The configurations ``set_logical_device_configuration`` gave this device; None before."""
    _recognized(device)
    return _logical_configurations.get(device)


def _get_memory_info(device):
    """``{'current': bytes in use, 'peak': their peak}`` of a device's allocator (``'GPU:0'``, ``'CPU:0'``)."""
    return _nimbus.memory_info(_engine_name(device))


def _reset_memory_stats(device):
    """Sets the device's peak to its current use."""
    _nimbus.reset_memory_stats(_engine_name(device))


def _get_memory_usage(device):
    """Bytes in use on the device (TensorFlow's deprecated form of ``get_memory_info(device)['current']``)."""
    return _get_memory_info(device)["current"]


def set_soft_device_placement(enabled):
    """With False, ``nimbus.device`` on a device this process lacks raises instead of using the CPU."""
    device_module._soft_placement[0] = bool(enabled)  # pylint: disable=protected-access


def get_soft_device_placement():
    return device_module._soft_placement[0]  # pylint: disable=protected-access


# Threads. Nimbus runs ops one after another on one pool of compute threads: intra-op is its size,
# inter-op is kept for get_ and has no effect.
_inter_op_threads = [0]


def _set_intra_op_parallelism_threads(num_threads):
    """The compute threads every op's kernels share; 0: every core."""
    if int(num_threads) < 0:
        raise ValueError(f"set_intra_op_parallelism_threads: {num_threads} is negative; 0 means every core")
    _nimbus.set_threads(int(num_threads))


def _set_inter_op_parallelism_threads(num_threads):
    """Accepted and kept; ops run one after another, each on the intra-op threads."""
    if int(num_threads) < 0:
        raise ValueError(f"set_inter_op_parallelism_threads: {num_threads} is negative; 0 means the default")
    _inter_op_threads[0] = int(num_threads)


threading = types.SimpleNamespace(set_intra_op_parallelism_threads=_set_intra_op_parallelism_threads,
                                  get_intra_op_parallelism_threads=_nimbus.threads,
                                  set_inter_op_parallelism_threads=_set_inter_op_parallelism_threads,
                                  get_inter_op_parallelism_threads=lambda: _inter_op_threads[0])

def _enable_tensor_float_32_execution(enabled):
    """f32 matmuls on CUDA may run on TF32 Tensor Cores (a 10-bit mantissa); off by default, unlike TF."""
    _nimbus.set_allow_tf32(bool(enabled))


experimental = types.SimpleNamespace(
    enable_tensor_float_32_execution=_enable_tensor_float_32_execution,
    tensor_float_32_execution_enabled=_nimbus.allow_tf32,
    list_physical_devices=list_physical_devices,
    list_logical_devices=list_logical_devices,
    get_visible_devices=get_visible_devices,
    set_visible_devices=set_visible_devices,
    set_memory_growth=_set_memory_growth,
    get_memory_growth=_get_memory_growth,
    set_virtual_device_configuration=set_logical_device_configuration,
    get_virtual_device_configuration=get_logical_device_configuration,
    VirtualDeviceConfiguration=LogicalDeviceConfiguration,
    get_memory_info=_get_memory_info,
    reset_memory_stats=_reset_memory_stats,
    get_memory_usage=_get_memory_usage,
)
