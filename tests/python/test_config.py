"""nimbus.config's devices, memory and threads, and nimbus.device, as TensorFlow's guides use them:

    gpus = tf.config.experimental.list_physical_devices('GPU')
    if gpus:
        tf.config.experimental.set_memory_growth(gpus[0], True)
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nimbus as tf


def run_fresh(code):
    """Runs `code` in a new Python process (the runtime not yet initialized); returns its stdout."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env=os.environ, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_machine_has_one_physical_cpu_named_as_in_tensorflow():
    cpus = tf.config.list_physical_devices("CPU")
    assert cpus == [tf.config.PhysicalDevice(name="/physical_device:CPU:0", device_type="CPU")]
    assert tf.config.experimental.list_physical_devices("CPU") == cpus
    gpus = tf.config.list_physical_devices("GPU")
    assert all(d.device_type == "GPU" and d.name.startswith("/physical_device:GPU:") for d in gpus)
    assert tf.config.list_physical_devices() == cpus + gpus


def test_visible_devices_hide_gpus_and_keep_the_cpu():
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_visible_devices(cpus)  # the CPU alone: every GPU hidden
    assert tf.config.get_visible_devices() == cpus
    assert tf.config.experimental.get_visible_devices("GPU") == []
    with pytest.raises(ValueError, match="CPU must be visible"):
        tf.config.set_visible_devices([])
    tf.config.set_visible_devices(tf.config.list_physical_devices())


def test_the_guides_memory_growth_idiom_runs():
    gpus = tf.config.experimental.list_physical_devices("GPU")
    if gpus:
        try:
            tf.config.experimental.set_memory_growth(gpus[0], True)
            assert tf.config.experimental.get_memory_growth(gpus[0]) is True
        except RuntimeError:  # as in TensorFlow: another test initialized the runtime first
            pass


def test_set_memory_growth_on_a_cpu_raises_value_error_as_tensorflow_does():
    cpu = tf.config.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError, match="Cannot set memory growth on non-GPU"):
        tf.config.experimental.set_memory_growth(cpu, True)
    with pytest.raises(ValueError, match="Unrecognized device"):
        tf.config.experimental.set_memory_growth(tf.config.PhysicalDevice("/physical_device:GPU:7", "GPU"), True)


def test_get_memory_info_reflects_an_allocation_and_its_release():
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")
    assert set(before) == {"current", "peak"}
    big = tf.zeros([1024, 1024])  # 4 MiB of float32
    during = tf.config.experimental.get_memory_info("CPU:0")
    assert during["current"] - before["current"] >= 4 * 2**20
    assert during["peak"] >= during["current"]
    del big
    after = tf.config.experimental.get_memory_info("/device:CPU:0")
    assert after["current"] <= during["current"] - 4 * 2**20
    assert after["peak"] >= before["current"] + 4 * 2**20  # the peak remembers it
    tf.config.experimental.reset_memory_stats("CPU:0")
    assert tf.config.experimental.get_memory_info("CPU:0")["peak"] == after["current"]
    assert tf.config.experimental.get_memory_usage("CPU:0") == after["current"]


def test_device_scope_places_new_tensors():
    with tf.device("/CPU:0"):
        x = tf.constant([1.0, 2.0])
        y = tf.zeros([3]) + np.ones(3, np.float32)
    assert x.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert y.device.endswith("CPU:0")
    np.testing.assert_array_equal(y.numpy(), [1, 1, 1])


def test_a_gpu_scope_without_a_gpu_falls_back_to_the_cpu_unless_soft_placement_is_off():
    if tf.config.list_logical_devices("GPU"):
        with tf.device("/GPU:0"):
            assert tf.constant(1.0).device.endswith("GPU:0")
            assert tf.ones([2]).device.endswith("GPU:0")
        return
    with tf.device("/GPU:0"):
        assert tf.constant(1.0).device.endswith("CPU:0")
    assert tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(False)
    try:
        with pytest.raises(tf.errors.InvalidArgumentError, match="0 GPU device"):
            with tf.device("/GPU:0"):
                pass
    finally:
        tf.config.set_soft_device_placement(True)


def test_device_names_are_checked():
    with pytest.raises(ValueError, match="not a device name"):
        with tf.device("/TPU:0"):
            pass


def test_intra_op_threads_set_the_compute_pool():
    before = tf.config.threading.get_intra_op_parallelism_threads()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    try:
        assert tf.config.threading.get_intra_op_parallelism_threads() == 1
        np.testing.assert_allclose(tf.matmul(tf.ones([4, 8]), tf.ones([8, 2])).numpy(), np.full((4, 2), 8.0))
    finally:
        tf.config.threading.set_intra_op_parallelism_threads(before)
    with pytest.raises(ValueError, match="negative"):
        tf.config.threading.set_intra_op_parallelism_threads(-1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    assert tf.config.threading.get_inter_op_parallelism_threads() == 2


def test_jit_switch_round_trips():
    tf.config.optimizer.set_jit(False)
    assert tf.config.optimizer.get_jit() == ""
    tf.config.optimizer.set_jit(True)
    assert tf.config.optimizer.get_jit() == "autoclustering"


def test_tensor_float_32_switch_round_trips():
    assert not tf.config.experimental.tensor_float_32_execution_enabled()  # off by default, unlike TF
    tf.config.experimental.enable_tensor_float_32_execution(True)
    assert tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    assert not tf.config.experimental.tensor_float_32_execution_enabled()


def test_logical_cpu_devices_are_configured_before_the_runtime_starts_and_refused_after():
    out = run_fresh("""
        import nimbus as tf
        cpu = tf.config.list_physical_devices('CPU')[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
        print([d.name for d in tf.config.list_logical_devices('CPU')])
        print(len(tf.config.get_logical_device_configuration(cpu)))
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()])
        except RuntimeError as e:
            print('RuntimeError:', e)
        try:
            tf.config.experimental.set_memory_growth(cpu, True)
        except ValueError as e:
            print('ValueError:', e)
    """)
    lines = out.splitlines()
    assert lines[0] == "['/device:CPU:0', '/device:CPU:1']"
    assert lines[1] == "2"
    assert lines[2] == "RuntimeError: Virtual devices cannot be modified after being initialized"
    assert lines[3] == "ValueError: Cannot set memory growth on device when virtual devices configured"


def test_a_first_op_initializes_the_runtime():
    out = run_fresh("""
        import nimbus as tf
        tf.constant([1.0]) + 1.0
        try:
            tf.config.set_logical_device_configuration(tf.config.list_physical_devices('CPU')[0],
                                                       [tf.config.LogicalDeviceConfiguration()] * 2)
        except RuntimeError as e:
            print('RuntimeError:', e)
    """)
    assert out.strip() == "RuntimeError: Virtual devices cannot be modified after being initialized"


def test_a_cpu_memory_limit_caps_the_hosts_allocator():
    out = run_fresh("""
        import nimbus as tf
        cpu = tf.config.list_physical_devices('CPU')[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration(memory_limit=64)])
        tf.zeros([1024, 1024])                  # 4 MiB: fits
        try:
            tf.zeros([64, 1024, 1024])          # 256 MiB: over the 64 MB limit
        except tf.errors.ResourceExhaustedError as e:
            print('ResourceExhaustedError')
    """)
    assert out.strip() == "ResourceExhaustedError"


def test_logical_device_configurations_are_checked_before_anything_changes():
    cpu = tf.config.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError, match="at least one"):
        tf.config.set_logical_device_configuration(cpu, [])
    with pytest.raises(ValueError, match="a memory_limit, or none"):
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration(memory_limit=64), tf.config.LogicalDeviceConfiguration()])
    with pytest.raises(ValueError, match="experimental_priority"):
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration(experimental_priority=1)])
    assert tf.config.get_logical_device_configuration(cpu) is None
    assert len(tf.config.list_logical_devices("CPU")) == 1
