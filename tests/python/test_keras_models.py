"""nimbus.keras models: Sequential and functional models, their layers, weights, summary, JSON, saving and
loading (bit-identical predictions), and keras.datasets.fashion_mnist."""
import gzip
import os

import numpy as np
import pytest

import nimbus as tf

keras = tf.keras
layers = tf.keras.layers
rng = np.random.default_rng(11)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def mlp():
    return keras.Sequential([
        layers.Flatten(input_shape=(28, 28)),
        layers.Dense(512, activation="relu"),
        layers.Dense(10),
    ])


def cnn():
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.BatchNormalization(),
        layers.MaxPooling2D(),
        layers.Dropout(0.25),
        layers.Flatten(),
        layers.Dense(3, activation="softmax"),
    ])


def two_headed():
    image, extra = keras.Input((4,), name="image"), keras.Input((2,), name="extra")
    joined = layers.Concatenate()([layers.Dense(3, activation="tanh")(image), extra])
    return keras.Model([image, extra], [layers.Dense(1, name="score")(joined), layers.Dense(2)(joined)])


def test_sequential_mlp_with_input_shape_on_its_first_layer():
    model = mlp()
    assert model.count_params() == 784 * 512 + 512 + 512 * 10 + 10
    assert model(np.zeros((2, 28, 28), np.float32)).shape == (2, 10)
    assert len(model.trainable_variables) == 4 and model.non_trainable_variables == []
    assert model.input_shape == (None, 28, 28) and model.output_shape == (None, 10)


def test_sequential_without_an_input_builds_on_its_first_call_or_on_build():
    model = keras.Sequential()
    model.add(layers.Dense(3))
    model.add(layers.Dense(2))
    assert not model.built and model.weights == []
    with pytest.raises(ValueError, match="not built"):
        model.count_params()
    x = rand(5, 4)
    y = model(x).numpy()
    assert model.built and model.count_params() == 4 * 3 + 3 + 3 * 2 + 2
    k1, b1, k2, b2 = model.get_weights()
    np.testing.assert_allclose(y, (x @ k1 + b1) @ k2 + b2, rtol=1e-5, atol=1e-6)
    built = keras.Sequential([layers.Dense(2)])
    built.build((None, 7))
    assert built.layers[0].get_weights()[0].shape == (7, 2)


def test_functional_model_with_two_inputs_and_two_outputs():
    model = two_headed()
    assert [layer.name for layer in model.layers][:2] == ["image", "extra"]
    score, other = model([rand(3, 4), rand(3, 2)])
    assert score.shape == (3, 1) and other.shape == (3, 2)
    assert [t.shape for t in model.outputs] == [(None, 1), (None, 2)]
    single = keras.Model(model.inputs, model.get_layer("score").output)
    assert single([rand(3, 4), rand(3, 2)]).shape == (3, 1)  # one output, not a list


def test_model_layers_are_the_layer_objects_it_was_built_from():
    hidden = layers.Dense(8, activation="relu", name="hidden")
    model = keras.Sequential([layers.Flatten(input_shape=(2, 2)), hidden, layers.Dense(1)])
    assert model.layers[1] is hidden and model.get_layer("hidden") is hidden and model.get_layer(index=1) is hidden
    assert model.get_layer(index=-1).name == model.layers[2].name
    with pytest.raises(ValueError, match="has no layer 'nope'"):
        model.get_layer("nope")
    # A layer's symbolic output makes a feature extractor.
    features = keras.Model(model.input, hidden.output)
    x = rand(2, 2, 2)
    kernel, bias = hidden.get_weights()
    np.testing.assert_allclose(features(x).numpy(), np.maximum(x.reshape(2, 4) @ kernel + bias, 0), rtol=1e-5)


def test_summary_prints_keras_table_line_by_line():
    lines = []
    model = mlp()
    model.summary(print_fn=lines.append)
    assert lines[0] == f'Model: "{model.name}"'
    assert any(line.startswith(f" {model.layers[1].name} (Dense)") and "(None, 512)" in line and "401920" in line
               for line in lines)
    assert "Total params: 407050 (1.55 MB)" in lines
    with pytest.raises(ValueError, match="line_length"):
        model.summary(line_length=120)


def test_get_and_set_weights_round_trip_and_check_shapes():
    model = cnn()
    new = [rand(*w.shape) for w in model.get_weights()]
    new[3] = np.abs(new[3]) + 0.1  # BatchNormalization's gamma
    new[5] = np.abs(new[5]) + 0.1  # and moving variance
    model.set_weights(new)
    for got, want in zip(model.get_weights(), new):
        np.testing.assert_array_equal(got, want)
    kernel_name = model.layers[0].weights[0].name
    with pytest.raises(ValueError, match=f"weight '{kernel_name}' has shape \\(3, 3, 1, 4\\)"):
        model.set_weights([np.zeros((3, 3, 2, 4))] + new[1:])
    with pytest.raises(ValueError, match="got 2 arrays for its 8 weights"):
        model.set_weights(new[:2])


def test_freezing_layers_and_models():
    model = cnn()
    assert len(model.trainable_variables) == 6 and len(model.non_trainable_variables) == 2
    model.layers[0].trainable = False  # the Conv2D
    assert len(model.trainable_variables) == 4 and len(model.non_trainable_variables) == 4
    model.trainable = False
    assert model.trainable_variables == []


@pytest.mark.parametrize("make, data", [(cnn, lambda: rand(5, 8, 8, 1)), (two_headed, lambda: [rand(5, 4), rand(5, 2)])])
def test_saved_model_loads_and_predicts_bit_identically(tmp_path, make, data):
    model = make()
    x = data()
    model(x, training=True)  # moves the BatchNormalization statistics off their start
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model)
    assert [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]
    assert loaded.count_params() == model.count_params()
    expected, got = model(x), loaded(x)
    for e, g in zip(expected if isinstance(expected, list) else [expected], got if isinstance(got, list) else [got]):
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_saved_frozen_and_mixed_layers_load_as_they_were(tmp_path):
    model = keras.Sequential([layers.Dense(3, input_shape=(4,), trainable=False),
                              layers.Dense(2, dtype="mixed_bfloat16")])
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert not loaded.layers[0].trainable and loaded.layers[1].compute_dtype == "bfloat16"
    assert len(loaded.trainable_variables) == 2
    loaded.add(layers.Dense(1))  # a loaded Sequential takes more layers
    assert loaded(rand(2, 4)).shape == (2, 1)


def test_to_json_and_model_from_json_rebuild_the_architecture():
    model = two_headed()
    again = keras.models.model_from_json(model.to_json())
    assert [type(layer) for layer in again.layers] == [type(layer) for layer in model.layers]
    assert again.get_config() == model.get_config()
    again.set_weights(model.get_weights())
    x = [rand(2, 4), rand(2, 2)]
    for e, g in zip(model(x), again(x)):
        np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert isinstance(keras.Sequential.from_config(cnn().get_config()), keras.Sequential)


def test_save_weights_and_load_weights_into_a_fresh_model(tmp_path):
    model, fresh = cnn(), cnn()  # the fresh model's layers have other names
    x = rand(3, 8, 8, 1)
    model.save_weights(tmp_path / "w.safetensors")
    assert not np.array_equal(fresh(x).numpy(), model(x).numpy())
    fresh.load_weights(tmp_path / "w.safetensors")
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())
    wider = keras.Sequential([keras.Input((8, 8, 1)), layers.Conv2D(5, 3, padding="same"), layers.BatchNormalization(),
                              layers.MaxPooling2D(), layers.Dropout(0.25), layers.Flatten(), layers.Dense(3)])
    with pytest.raises(ValueError, match=r"weight '.*/kernel' has shape \(3, 3, 1, 5\)"):
        wider.load_weights(tmp_path / "w.safetensors")


def test_subclassed_and_nested_models_are_refused_with_the_reason():
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    with pytest.raises(NotImplementedError, match="subclassed models"):
        MyModel()
    with pytest.raises(NotImplementedError, match="a model as a layer"):
        keras.Sequential([cnn()])


@pytest.mark.skipif(not hasattr(tf, "GradientTape"), reason="nimbus.GradientTape is not in this build yet")
def test_model_call_in_training_mode_under_a_gradient_tape():
    model = keras.Sequential([layers.Dense(1, input_shape=(3,))])
    x = rand(4, 3)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x, training=True))
    kernel_grad, bias_grad = tape.gradient(loss, model.trainable_variables)
    np.testing.assert_allclose(np.asarray(kernel_grad)[:, 0], x.sum(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(bias_grad), [4.0])


FASHION_DIR = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(FASHION_DIR), reason="Debian's dataset-fashion-mnist is not installed")
def test_fashion_mnist_load_data_gives_keras_arrays():
    (x_train, y_train), (x_test, y_test) = keras.datasets.fashion_mnist.load_data()
    assert x_train.shape == (60000, 28, 28) and y_train.shape == (60000,)
    assert x_test.shape == (10000, 28, 28) and y_test.shape == (10000,)
    assert {a.dtype for a in (x_train, y_train, x_test, y_test)} == {np.dtype(np.uint8)}
    # The first labels, as Keras's copy has them, and the IDX files' bytes.
    assert y_train[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert y_test[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    with gzip.open(f"{FASHION_DIR}/t10k-images-idx3-ubyte.gz") as file:
        first_image = np.frombuffer(file.read(16 + 784)[16:], np.uint8).reshape(28, 28)
    np.testing.assert_array_equal(x_test[0], first_image)
    x_train[0, 0, 0] = 1  # writable, as Keras's arrays are


def test_fashion_mnist_missing_names_the_debian_package(tmp_path, monkeypatch):
    monkeypatch.setattr(keras.datasets.fashion_mnist, "DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        keras.datasets.fashion_mnist.load_data()
