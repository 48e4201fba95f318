"""The GradientTape loop of TensorFlow's guides that accumulates gradients: the loss divided by
accum_steps, gradients added up, optimizer.apply_gradients every 4th micro-batch. On the Fashion-MNIST
MLP it reaches >= 0.85 test accuracy after 2 epochs, as fit does."""
import numpy as np
import pytest

import nimbus as tf
from fashion_mnist import load_data

pytestmark = pytest.mark.skipif(not hasattr(tf, "GradientTape"), reason="this build has no nimbus.GradientTape yet")


def test_gradient_accumulation_loop_reaches_85_percent():
    (train_images, train_labels), (test_images, test_labels) = load_data()
    train_images = (train_images / 255.0).astype(np.float32)
    test_images = (test_images / 255.0).astype(np.float32)
    train_labels = train_labels.astype(np.int32)

    model = tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    optimizer = tf.keras.optimizers.Adam()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    accum_steps, micro_batch = 4, 16
    rng = np.random.default_rng(0)
    for _ in range(2):
        order = rng.permutation(len(train_images))
        accumulated = [tf.zeros_like(v) for v in model.trainable_variables]
        for step, start in enumerate(range(0, len(order), micro_batch)):
            batch = order[start:start + micro_batch]
            with tf.GradientTape() as tape:
                logits = model(train_images[batch], training=True)
                loss = loss_fn(train_labels[batch], logits) / accum_steps
            gradients = tape.gradient(loss, model.trainable_variables)
            accumulated = [a + g for a, g in zip(accumulated, gradients)]
            if (step + 1) % accum_steps == 0:
                optimizer.apply_gradients(zip(accumulated, model.trainable_variables))
                accumulated = [tf.zeros_like(v) for v in model.trainable_variables]

    assert int(optimizer.iterations.numpy()) == 2 * (len(train_images) // (micro_batch * accum_steps))
    predictions = np.argmax(model(test_images).numpy(), axis=1)
    assert np.mean(predictions == test_labels) >= 0.85
