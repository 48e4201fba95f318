"""nimbus.GradientTape as TensorFlow's guides use it: gradients against NumPy derivations and finite
differences, persistent and non-persistent tapes, watching, unconnected sources, stop_recording, nested
sources, and gradients equal bit for bit to those the C++ API computes on the same seed."""
import os
import subprocess

import numpy as np
import pytest

import nimbus as tf


def dense_with_weights(kernel, bias, activation=None):
    layer = tf.keras.layers.Dense(kernel.shape[1], activation=activation)
    layer(np.zeros((1, kernel.shape[0]), np.float32))  # builds it
    layer.weights[0].assign(kernel)
    layer.weights[1].assign(bias)
    return layer


def test_dense_relu_gradients_equal_the_numpy_derivation():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    kernel = rng.standard_normal((4, 3)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    upstream = rng.standard_normal((5, 3)).astype(np.float32)
    layer = dense_with_weights(kernel, bias, "relu")
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt)
    d_kernel, d_bias, d_x = tape.gradient(y, [*layer.trainable_weights, xt], output_gradients=upstream)
    d_pre = upstream * (x @ kernel + bias > 0)
    np.testing.assert_allclose(d_kernel.numpy(), x.T @ d_pre, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_bias.numpy(), d_pre.sum(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_x.numpy(), d_pre @ kernel.T, rtol=1e-5, atol=1e-6)


def test_gradients_match_central_finite_differences_in_float64():
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((3, 4)))
    w = tf.Variable(rng.standard_normal((4, 2)))
    c = tf.constant(rng.standard_normal((3, 2)))

    def f():
        return tf.reduce_sum(tf.tanh(tf.matmul(x, w)) * c + tf.square(x) @ w)

    with tf.GradientTape() as tape:
        loss = f()
    grad = tape.gradient(loss, w).numpy()
    assert grad.dtype == np.float64
    w0, eps = w.numpy(), 1e-6
    numeric = np.zeros_like(w0)
    for index in np.ndindex(*w0.shape):
        for sign in (1, -1):
            shifted = w0.copy()
            shifted[index] += sign * eps
            w.assign(shifted)
            numeric[index] += sign * f().numpy() / (2 * eps)
    w.assign(w0)
    np.testing.assert_allclose(grad, numeric, rtol=1e-7, atol=1e-8)


def test_a_list_of_targets_gives_the_gradient_of_their_sum():
    x = tf.constant(np.array([[1.0, 2.0]], np.float32))
    first = dense_with_weights(np.array([[1.0], [2.0]], np.float32), np.zeros(1, np.float32))
    second = dense_with_weights(np.array([[3.0], [-1.0]], np.float32), np.zeros(1, np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        a, b = first(x), second(x)
    np.testing.assert_array_equal(tape.gradient([a, b], x).numpy(), [[4.0, 1.0]])
    seeded = tape.gradient([a, b], x, output_gradients=[np.array([[2.0]], np.float32), None])
    np.testing.assert_array_equal(seeded.numpy(), [[5.0, 3.0]])


def test_a_non_persistent_tape_gives_one_set_of_gradients():
    layer = dense_with_weights(np.ones((2, 1), np.float32), np.zeros(1, np.float32))
    with tf.GradientTape() as tape:
        y = layer(np.ones((1, 2), np.float32))
    assert tape.gradient(y, layer.trainable_weights)[0] is not None
    with pytest.raises(RuntimeError, match="A non-persistent GradientTape can only be used to compute one set"):
        tape.gradient(y, layer.trainable_weights)


def test_a_persistent_tape_gives_the_same_gradients_again():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.zeros(1, np.float32))
    with tf.GradientTape(persistent=True) as tape:
        y = layer(np.array([[1.0, 4.0]], np.float32))
    first = [g.numpy() for g in tape.gradient(y, layer.trainable_weights)]
    second = [g.numpy() for g in tape.gradient(y, layer.trainable_weights)]
    np.testing.assert_array_equal(first[0], [[1.0], [4.0]])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_tensors_are_watched_only_when_asked():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.zeros(1, np.float32))
    watched, unwatched = tf.constant(np.ones((1, 2), np.float32)), tf.constant(np.ones((1, 2), np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([watched])
        y = layer(watched)
        z = layer(unwatched)
    np.testing.assert_array_equal(tape.gradient(y, watched).numpy(), [[2.0, 3.0]])
    assert tape.gradient(z, unwatched) is None
    with pytest.raises(ValueError, match="not nimbus.Tensor or nimbus.Variable"):
        with tf.GradientTape() as other:
            other.watch(np.ones(2))


def test_watch_accessed_variables_false_watches_only_what_is_asked():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.zeros(1, np.float32))
    kernel, bias = layer.trainable_weights
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(bias)
        y = layer(np.ones((1, 2), np.float32))
    d_kernel, d_bias = tape.gradient(y, [kernel, bias])
    assert d_kernel is None
    np.testing.assert_array_equal(d_bias.numpy(), [1.0])
    assert [v.name for v in tape.watched_variables()] == [bias.name]


def test_watched_variables_in_the_order_they_were_read():
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(2,)), tf.keras.layers.Dense(1)])
    with tf.GradientTape() as tape:
        model(np.ones((1, 2), np.float32))
    assert [v.name for v in tape.watched_variables()] == [v.name for v in model.trainable_variables]


def test_unconnected_sources_get_none_or_zeros():
    used = dense_with_weights(np.ones((2, 1), np.float32), np.zeros(1, np.float32))
    unused = tf.Variable(np.ones((3, 2), np.float32))
    with tf.GradientTape(persistent=True) as tape:
        y = used(np.ones((1, 2), np.float32))
    assert tape.gradient(y, unused) is None
    zeros = tape.gradient(y, [unused], unconnected_gradients=tf.UnconnectedGradients.ZERO)[0]
    np.testing.assert_array_equal(zeros.numpy(), np.zeros((3, 2), np.float32))
    assert tape.gradient(y, unused, unconnected_gradients="zero").shape == (3, 2)


def test_integer_sources_get_no_gradient():
    with tf.GradientTape() as tape:
        counts = tf.constant(np.array([1, 2], np.int32))
        tape.watch(counts)
        y = tf.cast(counts, tf.float32) * 2.0
    assert tape.gradient(y, counts) is None


def test_stop_recording_leaves_its_ops_off_the_tape():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.zeros(1, np.float32))
    with tf.GradientTape(persistent=True) as tape:
        recorded = layer(np.ones((1, 2), np.float32))
        with tape.stop_recording():
            hidden = layer(np.ones((1, 2), np.float32))
        after = layer(np.ones((1, 2), np.float32))
    assert tape.gradient(hidden, layer.trainable_weights) == [None, None]
    assert tape.gradient(recorded, layer.trainable_weights)[0] is not None
    assert tape.gradient(after, layer.trainable_weights)[0] is not None, "recording resumes after the block"
    with pytest.raises(ValueError, match="only be called when the tape is recording"):
        with tape.stop_recording():
            pass


def test_ops_after_the_with_block_are_not_recorded():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.zeros(1, np.float32))
    with tf.GradientTape() as tape:
        pass
    y = layer(np.ones((1, 2), np.float32))
    assert tape.gradient(y, layer.trainable_weights) == [None, None]


def test_reset_forgets_what_was_recorded():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.zeros(1, np.float32))
    with tf.GradientTape(persistent=True) as tape:
        before = layer(np.ones((1, 2), np.float32))
        tape.reset()
        after = layer(np.ones((1, 2), np.float32))
    assert tape.gradient(before, layer.trainable_weights) == [None, None]
    np.testing.assert_array_equal(tape.gradient(after, layer.trainable_weights)[0].numpy(), [[1.0], [1.0]])


def test_nested_sources_give_gradients_in_the_same_structure():
    layer = dense_with_weights(np.array([[2.0], [3.0]], np.float32), np.array([0.5], np.float32))
    x = tf.constant(np.array([[1.0, -1.0]], np.float32))
    kernel, bias = layer.trainable_weights
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    grads = tape.gradient(y, {"layer": (kernel, bias), "input": [x]})
    assert set(grads) == {"layer", "input"} and isinstance(grads["layer"], tuple) and len(grads["input"]) == 1
    np.testing.assert_array_equal(grads["layer"][0].numpy(), [[1.0], [-1.0]])
    np.testing.assert_array_equal(grads["layer"][1].numpy(), [1.0])
    np.testing.assert_array_equal(grads["input"][0].numpy(), [[2.0, 3.0]])


def test_nested_tapes_give_second_derivatives():
    x = tf.constant(np.array([2.0]))
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x * x * x
        dy_dx = inner.gradient(y, x)  # 3 x^2, recorded by the outer tape
    np.testing.assert_array_equal(dy_dx.numpy(), [12.0])
    np.testing.assert_array_equal(outer.gradient(dy_dx, x).numpy(), [12.0])  # 6 x


def test_output_gradients_must_match_the_target():
    layer = dense_with_weights(np.ones((2, 1), np.float32), np.zeros(1, np.float32))
    with tf.GradientTape() as tape:
        y = layer(np.ones((3, 2), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"output_gradient.*\[2, 1\].*\[3, 1\]"):
        tape.gradient(y, layer.trainable_weights, output_gradients=np.ones((2, 1), np.float32))


def test_gradients_equal_the_cpp_apis_bit_for_bit(tmp_path):
    """The C++ program tests/python/cpp_gradients.cc builds the same model on the same seed."""
    helper = os.environ.get("NIMBUS_CPP_GRADIENTS")
    if helper is None:
        pytest.skip("NIMBUS_CPP_GRADIENTS (set by ctest) names the C++ side of this check")
    seed = 7
    subprocess.run([helper, str(tmp_path), str(seed)], check=True)

    def load(name):
        return np.load(tmp_path / f"{name}.npy")

    tf.random.set_seed(seed)
    model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(16,)),
                                 tf.keras.layers.Dense(10)])
    variables = model.trainable_variables
    for k, variable in enumerate(variables):
        assert variable.numpy().tobytes() == load(f"weight_{k}").tobytes(), f"weight {k} differs: not the same seed"
    x, labels = load("x"), load("labels")
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                              logits=model(x, training=True)))
    for k, grad in enumerate(tape.gradient(loss, variables)):
        assert grad.numpy().tobytes() == load(f"loss_gradient_{k}").tobytes(), f"loss gradient {k} differs"
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
    for k, grad in enumerate(tape.gradient(logits, variables, output_gradients=load("output_gradient"))):
        assert grad.numpy().tobytes() == load(f"seeded_gradient_{k}").tobytes(), f"seeded gradient {k} differs"
