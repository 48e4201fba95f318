"""nimbus.Tensor and nimbus.Variable against NumPy: exact round trips, the zero-copy cases, dtypes."""
import numpy as np
import pytest

import nimbus as tf

SUPPORTED = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]


def data_pointer(array):
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("numpy_dtype", SUPPORTED)
def test_constant_of_an_array_is_zero_copy_and_numpy_gives_it_back(numpy_dtype):
    array = (np.arange(24).reshape(2, 3, 4) % 5).astype(numpy_dtype)
    tensor = tf.constant(array)
    assert tensor.shape == (2, 3, 4)
    assert tensor.dtype == tf.as_dtype(numpy_dtype)
    back = tensor.numpy()
    assert data_pointer(back) == data_pointer(array)
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)
    assert data_pointer(np.asarray(tensor)) == data_pointer(array)
    assert data_pointer(tf.convert_to_tensor(array).numpy()) == data_pointer(array)


def test_a_wrapped_array_outlives_its_python_name():
    tensor = tf.constant(np.full((1000,), 7.5, np.float32))
    np.testing.assert_array_equal(tensor.numpy(), np.full((1000,), 7.5, np.float32))


def test_non_contiguous_and_cast_arrays_are_copied_exactly():
    array = np.arange(12, dtype=np.float64).reshape(3, 4)
    transposed = tf.constant(array.T)
    np.testing.assert_array_equal(transposed.numpy(), array.T)
    assert data_pointer(transposed.numpy()) != data_pointer(array)
    as_float32 = tf.constant(array, dtype=tf.float32)
    assert as_float32.dtype == tf.float32
    np.testing.assert_array_equal(as_float32.numpy(), array.astype(np.float32))


def test_python_values_are_typed_as_tensorflow_types_them():
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant([1, 2]).dtype == tf.int32
    assert tf.constant([True, False]).dtype == tf.bool
    assert tf.constant([[1, 2]], dtype=tf.float64).dtype == tf.float64
    assert tf.constant(0.1, dtype="float64").numpy() == 0.1
    assert tf.constant(2.0).shape == ()


def test_bfloat16_round_trips_through_float32():
    values = np.array([1.0, -2.5, 0.15625, 3e38], np.float32)  # all exact in bfloat16 but the last
    tensor = tf.constant(values, dtype=tf.bfloat16)
    assert tensor.dtype == tf.bfloat16
    out = tensor.numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[:3], values[:3])


def test_numpy_of_a_tensor_is_read_only():
    back = tf.constant(np.zeros(3, np.float32)).numpy()
    with pytest.raises(ValueError):
        back[0] = 1


def test_variable_copies_its_initial_value_and_assigns_in_place():
    array = np.ones((2, 2), np.float32)
    v = tf.Variable(array, name="w")
    v.assign_add(np.full((2, 2), 2, np.float32))
    np.testing.assert_array_equal(v.numpy(), np.full((2, 2), 3, np.float32))
    np.testing.assert_array_equal(array, np.ones((2, 2), np.float32))
    v.assign_sub([[1.0, 1.0], [1.0, 1.0]])
    v.assign(np.eye(2, dtype=np.float32))
    np.testing.assert_array_equal(v.numpy(), np.eye(2, dtype=np.float32))
    assert v.name == "w" and v.trainable and v.shape == [2, 2] and v.dtype == tf.float32


def test_dtypes_follow_tensorflow():
    assert tf.float32.name == "float32"
    assert tf.as_dtype("bfloat16") == tf.bfloat16
    assert tf.as_dtype(np.dtype("int64")) == tf.int64
    assert tf.float16.as_numpy_dtype is np.float16
    assert tf.float32.is_floating and not tf.int32.is_floating
    assert repr(tf.float32) == "nimbus.float32"


def test_bad_values_raise_tensorflow_errors_with_a_hint():
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        tf.constant(np.zeros(3, np.int16))
    assert "int16" in raised.value.message and "cast" in raised.value.hint
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.as_dtype("complex64")
    with pytest.raises(tf.errors.OpError):
        tf.Variable(np.zeros(2, np.float32)).assign(np.zeros(3, np.float32))


def test_tensors_print_as_tensorflows_do():
    tensor = tf.constant([[1.0, 2.0]])
    assert str(tensor) == "nimbus.Tensor([[1. 2.]], shape=(1, 2), dtype=float32)"
    assert repr(tensor) == "<nimbus.Tensor: shape=(1, 2), dtype=float32, numpy=array([[1., 2.]], dtype=float32)>"
    assert str(tf.constant(3)) == "nimbus.Tensor(3, shape=(), dtype=int32)"
    assert repr(tf.Variable([1.0], name="v")) == "<nimbus.Variable 'v' shape=(1,) dtype=float32, numpy=array([1.], dtype=float32)>"
