"""Keras training from Python: compile's arguments, fit's History and callbacks, evaluate and predict
against the model's own outputs, optimizers, losses and metrics against NumPy references."""
import csv
import re
import threading

import numpy as np
import pytest

import nimbus as tf

keras = tf.keras


def make_data(samples=96, features=8, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, features)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5).astype(np.int32)  # learnable classes 0..2
    return x, y % classes


def make_model(features=8, classes=3):
    return keras.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(features,)),
                             keras.layers.Dense(classes)])


def compiled_model(metrics=("accuracy",), **kwargs):
    model = make_model()
    model.compile(optimizer=kwargs.pop("optimizer", "adam"),
                  loss=kwargs.pop("loss", keras.losses.SparseCategoricalCrossentropy(from_logits=True)),
                  metrics=list(metrics), **kwargs)
    return model


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# compile


def test_compile_resolves_names_as_keras_does():
    model = compiled_model(metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=2, name="top2")])
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    assert model.metrics_names == ["loss", "accuracy", "top2"]
    x, y = make_data()
    # 'accuracy' with a sparse loss is sparse categorical accuracy.
    logits = model.predict(x)
    expected = np.mean(np.argmax(logits, -1) == y)
    assert model.evaluate(x, y, return_dict=True)["accuracy"] == pytest.approx(expected)


def test_compile_refuses_what_it_cannot_run():
    model = make_model()
    with pytest.raises(ValueError, match="unknown loss"):
        model.compile(optimizer="adam", loss="no_such_loss")
    with pytest.raises(ValueError, match="unknown optimizer"):
        model.compile(optimizer="adagrad_x", loss="mse")

    class PythonMetric(keras.callbacks.Callback):  # anything that is not an engine metric
        pass

    with pytest.raises(tf.errors.UnimplementedError, match="metric"):
        model.compile(optimizer="adam", loss="mse", metrics=[PythonMetric()])
    with pytest.raises(tf.errors.UnimplementedError, match="clipvalue"):
        keras.optimizers.SGD(clipvalue=1.0)
    with pytest.raises(RuntimeError, match="compile"):
        make_model().fit(*make_data())


def test_fit_refuses_class_weight():
    model = compiled_model()
    with pytest.raises(tf.errors.UnimplementedError, match="class_weight"):
        model.fit(*make_data(), class_weight={0: 1.0, 1: 2.0, 2: 1.0}, verbose=0)


# evaluate and predict


def test_predict_equals_the_model_called_on_x():
    model = compiled_model()
    x, _ = make_data(samples=50)
    predicted = model.predict(x, batch_size=16, verbose=0)  # 50 = 3 x 16 + 2: a short last batch
    assert isinstance(predicted, np.ndarray)
    assert predicted.shape == (50, 3)
    np.testing.assert_allclose(predicted, model(x).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict_on_batch(x), predicted, rtol=1e-5, atol=1e-6)


def test_predict_before_compile():
    model = make_model()
    x, _ = make_data(samples=10)
    np.testing.assert_allclose(model.predict(x, verbose=0), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_evaluate_equals_numpy_on_the_models_outputs():
    model = compiled_model()
    x, y = make_data(samples=70)
    logits = model(x).numpy().astype(np.float64)
    loss = -np.mean(log_softmax(logits)[np.arange(len(y)), y])
    accuracy = np.mean(np.argmax(logits, -1) == y)
    scores = model.evaluate(x, y, batch_size=32, verbose=0)
    assert scores == pytest.approx([loss, accuracy], rel=1e-5)
    assert model.evaluate(x, y, verbose=0, return_dict=True) == pytest.approx({"loss": loss, "accuracy": accuracy},
                                                                             rel=1e-5)
    assert model.test_on_batch(x, y) == pytest.approx([loss, accuracy], rel=1e-5)
    no_metrics = compiled_model(metrics=())
    assert isinstance(no_metrics.evaluate(x, y, verbose=0), float)  # a scalar without metrics, as Keras


def test_predict_releases_the_gil():
    model = make_model(features=256)
    x = np.random.default_rng(0).standard_normal((20000, 256)).astype(np.float32)
    model.predict(x[:8], verbose=0)  # traced once before
    done = threading.Event()
    counts = []

    def count_while_predicting():
        count = 0
        while not done.is_set():
            count += 1
        counts.append(count)

    thread = threading.Thread(target=count_while_predicting)
    thread.start()
    for _ in range(5):
        model.predict(x, batch_size=20000, verbose=0)
    done.set()
    thread.join()
    # With the GIL held through predict the counter thread would only run between the calls.
    assert counts[0] > 1000


# fit, History and callbacks


def test_fit_returns_history_per_epoch_with_validation_split():
    model = compiled_model()
    x, y = make_data(samples=100)
    history = model.fit(x, y, batch_size=16, epochs=3, validation_split=0.2, verbose=0)
    assert history is model.history
    assert history.epoch == [0, 1, 2]
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert all(len(values) == 3 for values in history.history.values())
    assert history.params == {"verbose": 0, "epochs": 3, "steps": 5}  # 80 training samples / 16
    assert history.history["loss"][-1] < history.history["loss"][0]
    # The validation split is the last 20 samples, as in Keras.
    assert history.history["val_loss"][-1] == pytest.approx(model.evaluate(x[80:], y[80:], verbose=0)[0], rel=1e-5)


def test_fit_learns_float64_inputs_and_uint8_labels():
    model = compiled_model(optimizer=keras.optimizers.Adam(learning_rate=0.02))
    x, y = make_data(samples=128)
    history = model.fit(x.astype(np.float64), y.astype(np.uint8), batch_size=16, epochs=10, verbose=0)
    assert history.history["accuracy"][-1] > 0.8


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", self.params["steps"]))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_train_batch_begin(self, batch, logs=None):
        self.calls.append(("batch_begin", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch, sorted(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, sorted(logs)))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", sorted(logs)))


def test_python_callback_hooks_come_in_keras_order_with_keras_arguments():
    model = compiled_model()
    recorder = Recorder()
    x, y = make_data(samples=48)
    model.fit(x, y, batch_size=16, epochs=2, validation_data=(x[:16], y[:16]), callbacks=[recorder], verbose=0)
    assert recorder.model is model
    batch_keys = ["accuracy", "loss"]
    epoch_keys = ["accuracy", "loss", "val_accuracy", "val_loss"]
    expected = [("train_begin", 3)]
    for epoch in range(2):
        expected.append(("epoch_begin", epoch))
        for batch in range(3):
            expected += [("batch_begin", batch), ("batch_end", batch, batch_keys)]
        expected.append(("epoch_end", epoch, epoch_keys))
    expected.append(("train_end", epoch_keys))
    assert recorder.calls == expected


def test_a_callback_sees_every_epochs_logs_equal_to_the_history():
    seen = {}
    model = compiled_model()
    x, y = make_data()
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[
        keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.update({epoch: dict(logs)}))])
    assert sorted(seen) == [0, 1, 2]
    assert [seen[e]["loss"] for e in range(3)] == history.history["loss"]


def test_stop_training_from_a_python_callback():
    class StopAfterFirstEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = True

    model = compiled_model()
    history = model.fit(*make_data(), epochs=5, verbose=0, callbacks=[StopAfterFirstEpoch()])
    assert history.epoch == [0]


def test_early_stopping_stops_when_the_monitor_does_not_improve():
    model = compiled_model()
    # No epoch improves the loss by 10: the run stops after patience + 1 epochs.
    stopper = keras.callbacks.EarlyStopping(monitor="loss", min_delta=10, patience=1)
    history = model.fit(*make_data(), epochs=10, verbose=0, callbacks=[stopper])
    assert history.epoch == [0, 1]


def test_a_python_exception_in_a_callback_propagates_unchanged():
    class Boom(Exception):
        pass

    class RaiseAtSecondBatch(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                raise Boom("from the callback")

    model = compiled_model()
    with pytest.raises(Boom, match="from the callback"):
        model.fit(*make_data(), epochs=2, verbose=0, callbacks=[RaiseAtSecondBatch()])
    # The model still trains afterwards.
    assert len(model.fit(*make_data(), epochs=1, verbose=0).epoch) == 1


def test_progress_bar_prints_keras_lines(capsys):
    model = compiled_model()
    x, y = make_data(samples=64)
    model.fit(x, y, batch_size=16, epochs=2, validation_data=(x, y), verbose=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Epoch 1/2"
    assert re.fullmatch(r"4/4 \[=+\] - \d+s \d+(us|ms|s)/step - loss: \d+\.\d{4} - accuracy: \d\.\d{4}"
                        r" - val_loss: \d+\.\d{4} - val_accuracy: \d\.\d{4}", lines[1]), lines[1]
    assert lines[2] == "Epoch 2/2"
    assert len(lines) == 4
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert capsys.readouterr().out == ""


def test_csv_logger_and_model_checkpoint_write_their_files(tmp_path):
    model = compiled_model()
    log = tmp_path / "log.csv"
    history = model.fit(*make_data(), epochs=2, verbose=0, callbacks=[
        keras.callbacks.CSVLogger(str(log)),
        keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt-{epoch:02d}.safetensors"), monitor="loss")])
    rows = list(csv.DictReader(log.open()))
    assert [int(row["epoch"]) for row in rows] == [0, 1]
    assert [float(row["loss"]) for row in rows] == pytest.approx(history.history["loss"], rel=1e-5)
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == ["ckpt-01.safetensors", "ckpt-02.safetensors"]


def test_backup_and_restore_resumes_an_interrupted_fit(tmp_path):
    class Crash(Exception):
        pass

    class CrashInSecondEpoch(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise Crash()

    x, y = make_data()
    model = compiled_model()
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(Crash):
        model.fit(x, y, epochs=3, verbose=0, callbacks=[backup, CrashInSecondEpoch()])
    assert (tmp_path / "backup" / "backup.safetensors").exists()

    fresh = compiled_model()  # a new process would start from new weights
    history = fresh.fit(x, y, epochs=3, verbose=0, callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))])
    assert history.epoch == [1, 2]  # the first epoch came from the backup
    assert int(fresh.optimizer.iterations.numpy()) == 3 * 3  # 96 samples / 32 per step, three epochs
    assert not (tmp_path / "backup" / "backup.safetensors").exists()


def test_learning_rate_scheduler_and_the_optimizers_rate():
    model = compiled_model(optimizer=keras.optimizers.SGD(learning_rate=0.1))
    rates = []
    model.fit(*make_data(), epochs=3, verbose=0, callbacks=[
        keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 / (epoch + 1)),
        keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: rates.append(float(model.optimizer.lr)))])
    assert rates == pytest.approx([0.1, 0.05, 0.1 / 3])
    model.optimizer.learning_rate = 0.01
    assert model.optimizer.learning_rate.numpy() == pytest.approx(0.01)


def test_train_on_batch_takes_one_step():
    model = compiled_model()
    x, y = make_data(samples=32)
    before = model.evaluate(x, y, verbose=0)[0]
    loss, accuracy = model.train_on_batch(x, y)
    assert loss == pytest.approx(before, rel=1e-5)  # the batch's loss before the update
    assert int(model.optimizer.iterations.numpy()) == 1
    assert sorted(model.train_on_batch(x, y, return_dict=True)) == ["accuracy", "loss"]
    assert 0 <= accuracy <= 1


def test_a_python_loss_function_in_compile():
    x, y = make_data()
    model = make_model()
    model.compile(optimizer="adam", metrics=["sparse_categorical_accuracy"],
                  loss=lambda y_true, y_pred: keras.losses.sparse_categorical_crossentropy(y_true, y_pred,
                                                                                           from_logits=True))
    history = model.fit(x, y, epochs=2, verbose=0)
    logits = model(x).numpy().astype(np.float64)
    expected = -np.mean(log_softmax(logits)[np.arange(len(y)), y])
    assert model.evaluate(x, y, verbose=0)[0] == pytest.approx(expected, rel=1e-5)
    assert history.history["loss"][1] < history.history["loss"][0]


def test_jit_compile_and_run_eagerly_give_the_same_training():
    x, y = make_data()
    start = [w.numpy() for w in make_model().trainable_variables]
    losses = []
    for settings in ({"jit_compile": True}, {"jit_compile": False}, {"run_eagerly": True}):
        model = make_model()
        for variable, value in zip(model.trainable_variables, start):
            variable.assign(value)
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), **settings)
        losses.append(model.fit(x, y, epochs=2, shuffle=False, verbose=0).history["loss"])
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    assert losses[2] == pytest.approx(losses[0], rel=1e-4)


# optimizers, schedules, losses and metrics


def test_apply_gradients_sgd_clipnorm_and_adam():
    variable = tf.Variable(np.array([1.0, 2.0], np.float32))
    sgd = keras.optimizers.SGD(learning_rate=0.1)
    sgd.apply_gradients(zip([np.array([0.5, -1.0], np.float32)], [variable]))
    np.testing.assert_allclose(variable.numpy(), [0.95, 2.1], rtol=1e-6)
    assert int(sgd.iterations.numpy()) == 1

    clipped = tf.Variable(np.zeros(2, np.float32))
    keras.optimizers.SGD(learning_rate=1.0, clipnorm=1.0).apply_gradients([(np.array([3.0, 4.0], np.float32),
                                                                            clipped)])
    np.testing.assert_allclose(clipped.numpy(), [-0.6, -0.8], rtol=1e-6)

    weight = tf.Variable(np.array([1.0], np.float32))
    keras.optimizers.Adam(learning_rate=0.01).apply_gradients([(np.array([0.3], np.float32), weight)])
    # Adam's first step moves each weight by lr (m / (1 - b1) = g, sqrt(v / (1 - b2)) = |g|).
    np.testing.assert_allclose(weight.numpy(), [0.99], rtol=1e-5)


def test_schedules_follow_keras_formulas():
    schedules = keras.optimizers.schedules
    decay = schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    assert decay(10).numpy() == pytest.approx(0.05)
    assert decay(5).numpy() == pytest.approx(0.1 * 0.5 ** 0.5)
    steps = schedules.PiecewiseConstantDecay(boundaries=[5, 10], values=[1.0, 0.5, 0.1])
    assert [float(steps(s).numpy()) for s in (0, 5, 6, 10, 11)] == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.1])
    cosine = schedules.CosineDecay(1.0, decay_steps=10, alpha=0.1)
    assert cosine(5).numpy() == pytest.approx((1 - 0.1) * 0.5 * (1 + np.cos(np.pi / 2)) + 0.1)
    optimizer = keras.optimizers.SGD(learning_rate=decay)
    assert optimizer.learning_rate is decay
    variable = tf.Variable(np.array([0.0], np.float32))
    for _ in range(10):
        optimizer.apply_gradients([(np.array([1.0], np.float32), variable)])
    expected = -sum(0.1 * 0.5 ** (step / 10) for step in range(10))
    np.testing.assert_allclose(variable.numpy(), [expected], rtol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="values"):
        schedules.PiecewiseConstantDecay([5], [1.0])


def test_losses_match_numpy():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6).astype(np.int32)
    per_sample = -log_softmax(logits.astype(np.float64))[np.arange(6), labels]
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    assert loss(labels, logits).numpy() == pytest.approx(per_sample.mean(), rel=1e-5)
    np.testing.assert_allclose(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True).numpy(),
                               per_sample, rtol=1e-5)
    target, prediction = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
    error = np.abs(target - prediction).astype(np.float64)
    huber = np.where(error <= 0.5, 0.5 * error ** 2, 0.5 * (error - 0.25)).mean(axis=-1)
    np.testing.assert_allclose(keras.losses.huber(target, prediction, delta=0.5).numpy(), huber, rtol=1e-5)
    assert keras.losses.Huber(delta=0.5)(target, prediction).numpy() == pytest.approx(huber.mean(), rel=1e-5)
    assert keras.losses.MeanSquaredError()(target, prediction).numpy() == pytest.approx(
        np.mean((target - prediction) ** 2), rel=1e-5)
    none = keras.losses.MeanAbsoluteError(reduction="none")(target, prediction).numpy()
    np.testing.assert_allclose(none, np.abs(target - prediction).mean(axis=-1), rtol=1e-5)


def test_metrics_update_result_reset():
    accuracy = keras.metrics.SparseCategoricalAccuracy()
    accuracy.update_state(np.array([0, 1], np.int32), np.array([[0.9, 0.1], [0.8, 0.2]], np.float32))
    accuracy.update_state(np.array([1], np.int32), np.array([[0.1, 0.9]], np.float32))
    assert accuracy.result().numpy() == pytest.approx(2 / 3)
    accuracy.reset_state()
    assert accuracy.result().numpy() == 0
    mean = keras.metrics.Mean()
    mean.update_state([1.0, 3.0, 5.0, 7.0])
    assert mean.result().numpy() == pytest.approx(4.0)
    mean.update_state([10.0], sample_weight=[4.0])
    assert mean.result().numpy() == pytest.approx((16 + 40) / 8)
    exact = keras.metrics.Accuracy()
    exact.update_state(np.array([1, 2, 3, 4], np.float32), np.array([1, 2, 0, 4], np.float32))
    assert exact.result().numpy() == pytest.approx(0.75)


def test_minimize_with_a_callable_loss_and_with_a_tape():
    variable = tf.Variable(np.array([3.0], np.float32))
    optimizer = keras.optimizers.SGD(learning_rate=0.1)
    optimizer.minimize(lambda: tf.reduce_sum(variable * variable), [variable])
    np.testing.assert_allclose(variable.numpy(), [3.0 - 0.1 * 6.0], rtol=1e-6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(variable * variable)
    optimizer.minimize(loss, [variable], tape=tape)
    np.testing.assert_allclose(variable.numpy(), [2.4 - 0.1 * 4.8], rtol=1e-6)
    assert int(optimizer.iterations.numpy()) == 2
