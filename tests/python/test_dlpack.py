"""DLPack: nimbus tensors shared with NumPy and PyTorch without a copy, both ways (same data pointer,
and a write on one side seen on the other), dtypes kept (bfloat16 as torch.bfloat16)."""
import numpy as np
import pytest

import nimbus as tf

torch = pytest.importorskip("torch", reason="python3-torch (scripts/install-deps) for the DLPack exchange")


def pointer_of(array):
    return array.__array_interface__["data"][0]


def test_numpy_reads_a_tensor_without_a_copy():
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = tf.constant(source)  # wraps the array: same memory
    seen = np.from_dlpack(tensor)
    assert pointer_of(seen) == pointer_of(source)
    np.testing.assert_array_equal(seen, source)
    assert tensor.__dlpack_device__() == (1, 0)  # kDLCPU, device 0


def test_a_tensor_from_numpy_through_dlpack_is_a_view():
    source = np.arange(6, dtype=np.int64).reshape(2, 3)
    tensor = tf.from_dlpack(source)
    assert tensor.dtype == tf.int64 and tensor.shape == (2, 3)
    assert pointer_of(tensor.numpy()) == pointer_of(source)
    source[0, 0] = 42
    assert int(tensor[0, 0]) == 42


@pytest.mark.parametrize("dtype, torch_dtype", [(tf.float32, torch.float32), (tf.float64, torch.float64),
                                                (tf.float16, torch.float16), (tf.int32, torch.int32),
                                                (tf.int64, torch.int64), (tf.uint8, torch.uint8),
                                                (tf.bfloat16, torch.bfloat16)])
def test_torch_and_nimbus_share_memory_both_ways(dtype, torch_dtype):
    tensor = tf.cast(tf.reshape(tf.range(24), [2, 3, 4]), dtype)
    from_nimbus = torch.from_dlpack(tensor)
    assert from_nimbus.dtype == torch_dtype and tuple(from_nimbus.shape) == (2, 3, 4)
    np.testing.assert_array_equal(from_nimbus.float().numpy(), np.arange(24).reshape(2, 3, 4))
    from_nimbus[0, 0, 0] = 9  # one memory: the write shows in the nimbus tensor
    assert float(tf.cast(tensor[0, 0, 0], tf.float32)) == 9.0
    if dtype != tf.bfloat16:  # NumPy has no bfloat16 to wrap
        source = np.ones((2, 2), dtype.as_numpy_dtype)
        assert torch.from_dlpack(tf.constant(source)).data_ptr() == pointer_of(source)

    original = torch.arange(24).reshape(4, 6).to(torch_dtype)
    back = tf.from_dlpack(original)
    assert back.dtype == dtype and back.shape == (4, 6)
    again = torch.from_dlpack(back)  # the same memory, round trip
    assert again.data_ptr() == original.data_ptr()
    original[0, 0] = 5
    assert float(tf.cast(back[0, 0], tf.float32)) == 5.0


def test_experimental_dlpack_capsules_as_tensorflow_names_them():
    tensor = tf.constant(np.linspace(0, 1, 5, dtype=np.float32))
    capsule = tf.experimental.dlpack.to_dlpack(tensor)
    back = tf.experimental.dlpack.from_dlpack(capsule)
    assert pointer_of(back.numpy()) == pointer_of(tensor.numpy())
    with pytest.raises(tf.errors.InvalidArgumentError, match="consumed"):
        tf.experimental.dlpack.from_dlpack(capsule)  # a capsule is used once
    unused = tf.experimental.dlpack.to_dlpack(tensor)
    del unused  # an unconsumed capsule frees its reference itself
    np.testing.assert_array_equal(tensor.numpy(), np.linspace(0, 1, 5, dtype=np.float32))


def test_a_tensor_outlives_the_torch_name_it_came_from():
    original = torch.full((1000,), 3.5)
    tensor = tf.from_dlpack(original)
    del original
    np.testing.assert_array_equal(tensor.numpy(), np.full(1000, 3.5, np.float32))


def test_unsupported_exchanges_raise_with_a_remedy():
    with pytest.raises(tf.errors.InvalidArgumentError, match="contiguous"):
        tf.from_dlpack(torch.arange(12.0).reshape(3, 4).t())
    with pytest.raises(tf.errors.InvalidArgumentError, match="bool"):
        torch.from_dlpack(tf.constant([True, False]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="__dlpack__"):
        tf.from_dlpack([1, 2, 3])
