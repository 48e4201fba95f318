"""The first Keras path: a Sequential and a functional model run on NumPy input."""
import numpy as np

import nimbus as tf


def test_sequential_mlp_with_input_shape_on_its_first_layer():
    model = tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    assert model.count_params() == 784 * 512 + 512 + 512 * 10 + 10
    assert model(np.zeros((2, 28, 28), np.float32)).shape == (2, 10)
    assert len(model.trainable_variables) == 4


def test_functional_dense_matches_numpy():
    inputs = tf.keras.Input((4,))
    outputs = tf.keras.layers.Dense(3)(inputs)
    assert outputs.shape == (None, 3)
    model = tf.keras.Model(inputs, outputs)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    kernel, bias = (w.numpy() for w in model.trainable_variables)
    np.testing.assert_allclose(model(x).numpy(), x @ kernel + bias, rtol=1e-6)
