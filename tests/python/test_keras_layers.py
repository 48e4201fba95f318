"""nimbus.keras.layers: each layer against a NumPy reference, Keras's positional forms, the arguments the
engine lacks refused by name, activations, initializers, regularizers and mixed-precision policies."""
import numpy as np
import pytest

import nimbus as tf

keras = tf.keras
layers = tf.keras.layers
rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(autouse=True)
def float32_policy():
    """Every test starts and ends under the default policy."""
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def conv2d_reference(x, kernel, stride=1, same=False):
    """NHWC convolution (cross-correlation, as Keras's), f64."""
    kh, kw = kernel.shape[:2]
    if same:
        x = np.pad(x, ((0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)))
    n, h, w, _ = x.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, oh, ow, kernel.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :].astype(np.float64)
            out[:, i, j, :] = np.tensordot(patch, kernel, axes=([1, 2, 3], [0, 1, 2]))
    return out


def test_dense_relu_matches_numpy():
    dense = layers.Dense(3, activation="relu")
    x = rand(4, 5)
    y = dense(x).numpy()
    kernel, bias = dense.get_weights()
    assert kernel.shape == (5, 3) and bias.shape == (3,)
    np.testing.assert_allclose(y, np.maximum(x @ kernel + bias, 0), rtol=1e-5, atol=1e-6)


def test_conv2d_positional_forms_and_numpy_reference():
    conv = layers.Conv2D(2, 3, padding="same")
    assert conv.get_config()["kernel_size"] == [3, 3]
    x = rand(1, 5, 6, 3)
    y = conv(x).numpy()
    kernel, bias = conv.get_weights()
    assert kernel.shape == (3, 3, 3, 2)
    np.testing.assert_allclose(y, conv2d_reference(x, kernel, same=True) + bias, rtol=1e-4, atol=1e-5)
    strided = layers.Conv2D(4, (3, 2), (2, 1))  # kernel_size and strides as positional tuples
    assert strided(rand(2, 7, 5, 1)).shape == (2, 3, 4, 4)
    kernel, bias = strided.get_weights()
    # Stride 2 down the rows: every other row of the stride-1 result.
    np.testing.assert_allclose(strided(x[..., :1]).numpy(), conv2d_reference(x[..., :1], kernel)[:, ::2] + bias,
                               rtol=1e-4, atol=1e-5)


def test_depthwise_conv2d_matches_numpy():
    layer = layers.DepthwiseConv2D(3, depth_multiplier=2)
    x = rand(2, 5, 5, 3)
    y = layer(x).numpy()
    kernel, bias = layer.get_weights()
    assert kernel.shape == (3, 3, 3, 2) and y.shape == (2, 3, 3, 6)
    for c in range(3):
        for m in range(2):
            expected = conv2d_reference(x[..., c:c + 1], kernel[:, :, c:c + 1, m:m + 1])[..., 0]
            np.testing.assert_allclose(y[..., c * 2 + m], expected + bias[c * 2 + m], rtol=1e-4, atol=1e-5)


def test_pooling_layers_match_numpy():
    x = rand(2, 4, 6, 3)
    blocks = x.reshape(2, 2, 2, 3, 2, 3)
    np.testing.assert_allclose(layers.MaxPooling2D()(x).numpy(), blocks.max(axis=(2, 4)))
    np.testing.assert_allclose(layers.AveragePooling2D(2)(x).numpy(), blocks.mean(axis=(2, 4)), rtol=1e-6)
    assert layers.MaxPool2D is layers.MaxPooling2D
    assert layers.MaxPool2D((2, 2), strides=1, padding="same")(x).shape == (2, 4, 6, 3)
    np.testing.assert_allclose(layers.GlobalAveragePooling2D()(x).numpy(), x.mean(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(layers.GlobalAveragePooling1D()(x[:, 0]).numpy(), x[:, 0].mean(axis=1), rtol=1e-5)


def test_shape_and_merge_layers():
    x, z = rand(2, 3, 4), rand(2, 3, 4)
    np.testing.assert_array_equal(layers.Flatten()(x).numpy(), x.reshape(2, 12))
    np.testing.assert_array_equal(layers.Reshape((4, 3))(x).numpy(), x.reshape(2, 4, 3))
    np.testing.assert_allclose(layers.Activation("tanh")(x).numpy(), np.tanh(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layers.Add()([x, z]).numpy(), x + z)
    np.testing.assert_array_equal(layers.Concatenate()([x, z]).numpy(), np.concatenate([x, z], axis=-1))
    np.testing.assert_array_equal(layers.Concatenate(axis=1)([x, z]).numpy(), np.concatenate([x, z], axis=1))


def test_dropout_is_identity_unless_training():
    x = rand(8, 16) + 3
    dropout = layers.Dropout(0.5, seed=1)
    np.testing.assert_array_equal(dropout(x).numpy(), x)
    np.testing.assert_array_equal(dropout(x, training=False).numpy(), x)
    y = dropout(x, training=True).numpy()
    kept = y != 0
    assert 0 < kept.sum() < x.size
    np.testing.assert_allclose(y[kept], 2 * x[kept], rtol=1e-6)


def test_batch_normalization_inference_uses_the_moving_statistics():
    bn = layers.BatchNormalization(epsilon=0.01)
    x = rand(4, 3)
    bn(x)  # builds
    gamma, beta, mean, variance = rand(3), rand(3), rand(3), np.abs(rand(3)) + 0.5
    bn.set_weights([gamma, beta, mean, variance])
    expected = (x - mean) / np.sqrt(variance + 0.01) * gamma + beta
    np.testing.assert_allclose(bn(x, training=False).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert [w.name.split("/")[-1] for w in bn.non_trainable_weights] == ["moving_mean", "moving_variance"]


def test_layer_normalization_matches_numpy():
    x = rand(3, 5)
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(layers.LayerNormalization()(x).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_embedding_and_position_embedding():
    embedding = layers.Embedding(10, 4)
    ids = np.array([[1, 9, 0], [3, 3, 2]], np.int32)
    y = embedding(ids).numpy()
    (table,) = embedding.get_weights()
    np.testing.assert_array_equal(y, table[ids])
    assert np.abs(table).max() <= 0.05
    position = layers.PositionEmbedding(sequence_length=6)
    x = rand(2, 4, 3)
    y = position(x).numpy()
    (positions,) = position.get_weights()
    np.testing.assert_array_equal(y, np.broadcast_to(positions[:4], x.shape))


def test_multi_head_attention_matches_numpy_with_keyword_arguments():
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=3)
    query, value = rand(2, 4, 5), rand(2, 6, 5)
    mask = (rng.random((2, 4, 6)) > 0.3).astype(np.float32)
    y = mha(query, value, attention_mask=mask).numpy()
    w = {v.name.split("/", 1)[1]: v.numpy().astype(np.float64) for v in mha.weights}
    q = np.einsum("ntd,dhk->nhtk", query, w["query/kernel"]) + w["query/bias"][None, :, None, :]
    k = np.einsum("nsd,dhk->nhsk", value, w["key/kernel"]) + w["key/bias"][None, :, None, :]
    v = np.einsum("nsd,dhk->nhsk", value, w["value/kernel"]) + w["value/bias"][None, :, None, :]
    scores = np.einsum("nhtk,nhsk->nhts", q, k) / np.sqrt(3) + (1 - mask[:, None]) * -1e9
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expected = np.einsum("nhts,nhsk,hko->nto", p, v, w["attention_output/kernel"]) + w["attention_output/bias"]
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    # key defaults to the value
    np.testing.assert_allclose(mha(query, value).numpy(), mha(query, value, key=value).numpy())
    with pytest.raises(ValueError, match="return_attention_scores"):
        mha(query, value, return_attention_scores=True)


def test_normalization_adapt_and_rescaling():
    data = rand(200, 3) * 4 + 2
    norm = layers.Normalization()
    norm.adapt(data)
    x = rand(5, 3)
    np.testing.assert_allclose(norm(x).numpy(), (x - data.mean(0)) / data.std(0), rtol=1e-3, atol=1e-4)
    fixed = layers.Normalization(mean=1.0, variance=4.0)
    np.testing.assert_allclose(fixed(x).numpy(), (x - 1) / 2, rtol=1e-6)
    pixels = np.array([[0, 128, 255]], np.uint8)
    y = layers.Rescaling(1 / 255.0, offset=-0.5)(pixels)
    assert y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), pixels / 255.0 - 0.5, atol=1e-6)


def test_input_layer_declares_a_sequential_input():
    model = keras.Sequential([layers.InputLayer(input_shape=(3,)), layers.Dense(2)])
    assert model.built and model.output_shape == (None, 2)


def test_unknown_keyword_arguments_are_type_errors_naming_layer_and_argument():
    with pytest.raises(TypeError, match=r"Dense 'out': unexpected keyword argument\(s\) kernel_sise"):
        layers.Dense(2, kernel_sise=3, name="out")


@pytest.mark.parametrize("make, words", [
    (lambda: layers.Dense(2, bias_regularizer="l2"), "Dense: bias_regularizer"),
    (lambda: layers.Conv2D(2, 3, data_format="channels_first"), "Conv2D: data_format='channels_first'"),
    (lambda: layers.Conv2D(2, 3, groups=2), "Conv2D: groups=2"),
    (lambda: layers.Conv2D(2, 3, padding="full"), "Conv2D: padding='full'"),
    (lambda: layers.Conv2D(2, (1, 2, 3)), "Conv2D: kernel_size"),
    (lambda: layers.Dropout(0.5, noise_shape=(1, 3)), "Dropout: noise_shape"),
    (lambda: layers.LayerNormalization(center=False), "LayerNormalization: center=False"),
    (lambda: layers.Embedding(10, 4, mask_zero=True), "Embedding: mask_zero=True"),
    (lambda: layers.Dense(2, activation="elu"), "Dense: activation='elu'"),
    (lambda: layers.Dense(2, activation=lambda x: x), "Dense: activation="),
    (lambda: layers.Dense(2, dtype="float64"), "Dense: dtype='float64'"),
    (lambda: layers.Dense(2, kernel_initializer="orthogonal"), "Dense: kernel_initializer"),
    (lambda: keras.initializers.Constant(0.5), "Constant"),
    (lambda: keras.initializers.RandomUniform(-1, 1), "RandomUniform"),
])
def test_arguments_the_engine_lacks_are_refused_by_name(make, words):
    with pytest.raises(ValueError) as raised:
        make()
    assert words in str(raised.value)


def test_missing_layers_and_custom_layers_say_what_exists():
    with pytest.raises(AttributeError, match="no LSTM: Nimbus's layers are .*Dense"):
        _ = layers.LSTM

    class Mine(layers.Layer):
        pass

    with pytest.raises(NotImplementedError, match="Mine: layers of one's own"):
        Mine()


def test_activations_by_name_or_function():
    x = rand(3, 4)
    np.testing.assert_allclose(keras.activations.relu(x).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(keras.activations.sigmoid(x).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-5)
    assert keras.activations.serialize(keras.activations.gelu) == "gelu"
    assert keras.activations.get("swish") is keras.activations.swish
    dense = layers.Dense(2, activation=keras.activations.softmax)
    assert dense.get_config()["activation"] == "softmax"
    np.testing.assert_allclose(dense(x).numpy().sum(-1), 1, rtol=1e-5)


def test_initializers_and_regularizers_reach_the_config():
    dense = layers.Dense(3, kernel_initializer=keras.initializers.HeNormal(seed=5), bias_initializer="ones",
                         kernel_regularizer=keras.regularizers.l2(1e-4))
    config = dense.get_config()
    assert config["kernel_initializer"] == {"class_name": "HeNormal", "config": {"seed": 5}}
    assert config["bias_initializer"] == "ones"
    assert config["kernel_regularizer"] == {"class_name": "L2", "config": {"l2": 1e-4}}
    both = layers.Conv2D(1, 1, kernel_regularizer=keras.regularizers.L1L2(l1=0.1, l2=0.2))
    assert both.get_config()["kernel_regularizer"]["config"] == {"l1": 0.1, "l2": 0.2}
    dense(rand(2, 4))
    again = layers.Dense(3, kernel_initializer=keras.initializers.HeNormal(seed=5))
    again(rand(2, 4))
    np.testing.assert_array_equal(dense.get_weights()[0], again.get_weights()[0])  # a seed fixes the values
    np.testing.assert_array_equal(dense.get_weights()[1], np.ones(3))
    values = keras.initializers.GlorotUniform(seed=1)(shape=(20, 30)).numpy()
    assert values.shape == (20, 30) and np.abs(values).max() <= np.sqrt(6 / 50)
    assert keras.initializers.Constant(0)(shape=(2,)).numpy().tolist() == [0, 0]


def test_frozen_layers_keep_weights_out_of_training():
    dense = layers.Dense(2, trainable=False)
    dense(rand(1, 3))
    assert dense.trainable_weights == [] and len(dense.non_trainable_weights) == 2
    dense.trainable = True
    assert len(dense.trainable_weights) == 2


def test_policies_and_layer_dtype_properties():
    policy = keras.mixed_precision.Policy("mixed_float16")
    assert (policy.name, policy.compute_dtype, policy.variable_dtype) == ("mixed_float16", "float16", "float32")
    with pytest.raises(ValueError, match="unknown policy 'mixed_int8'"):
        keras.mixed_precision.Policy("mixed_int8")
    dense = layers.Dense(2, dtype="mixed_bfloat16")
    assert dense.compute_dtype == "bfloat16" and dense.dtype == "float32"
    assert layers.Dense(2).dtype_policy == keras.mixed_precision.Policy("float32")


def test_mixed_bfloat16_dense_computes_in_bfloat16_with_float32_variables():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    dense = layers.Dense(16)
    x = rand(8, 32)
    y = dense(x)
    assert dense.compute_dtype == "bfloat16"
    assert all(w.dtype == tf.float32 for w in dense.weights)
    assert y.dtype == tf.bfloat16
    kernel, bias = (w.astype(np.float64) for w in dense.get_weights())
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) @ kernel + bias, rtol=3e-2, atol=3e-2)
    # A model's outputs come back float32 (the loss is computed in float32).
    model = keras.Sequential([layers.Dense(4, input_shape=(32,))])
    assert model(x).dtype == tf.float32
