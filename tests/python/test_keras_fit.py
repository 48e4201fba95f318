"""The must-hold Keras path: the Fashion-MNIST MLP of TensorFlow's beginner guide, written as the guide
writes it, reaches >= 0.85 test accuracy after 2 epochs of fit on NumPy arrays."""
import numpy as np
import pytest

import nimbus as tf
from fashion_mnist import load_data


class EpochLogs(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = {}

    def on_epoch_end(self, epoch, logs=None):
        self.logs[epoch] = dict(logs)


def test_fashion_mnist_mlp_fit_reaches_85_percent():
    (train_images, train_labels), (test_images, test_labels) = load_data()
    train_images = (train_images / 255.0).astype(np.float32)
    test_images = (test_images / 255.0).astype(np.float32)

    model = tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    epoch_logs = EpochLogs()
    history = model.fit(train_images, train_labels, epochs=2, validation_data=(test_images, test_labels),
                        callbacks=[epoch_logs], verbose=0)

    test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=0)
    assert test_acc >= 0.85
    assert len(history.history["val_accuracy"]) == 2
    assert history.history["val_accuracy"][-1] == pytest.approx(test_acc, abs=1e-6)
    # The callback saw every epoch's logs, the same as the History.
    assert sorted(epoch_logs.logs) == [0, 1]
    for epoch in (0, 1):
        assert epoch_logs.logs[epoch] == {name: values[epoch] for name, values in history.history.items()}
    predictions = model.predict(test_images, verbose=0)
    assert predictions.shape == (10000, 10)
    assert np.mean(np.argmax(predictions, 1) == test_labels) == pytest.approx(test_acc, abs=1e-6)
    assert test_loss == pytest.approx(history.history["val_loss"][-1], rel=1e-6)
